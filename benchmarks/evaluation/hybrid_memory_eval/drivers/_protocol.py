"""The driver side of the foreign-peer protocol: JSON lines on stdin/stdout.

Imported by the driver scripts beside it, which run in a peer's own virtual environment
(``<venv>/bin/python <driver>.py``). Standard library only, and nothing from
``hybrid_memory``: that package is not installed in a peer's environment.

The driver answers one line per request, in order::

    (on start)                                           -> {"ready": true, "library": ..., ...}
    {"op": "add", "records": [{"id", "text", "tags", "metadata", "vector"}]} -> {"ok": true}
    {"op": "search", "query": str, "vector": [...], "k": int}             -> {"ids": [...]}
    {"op": "close"}                                                        -> {"ok": true}, exit 0

Any failure answers ``{"error": "..."}`` (the traceback goes to stderr) and the driver
waits for the next request. The protocol owns the process's real stdout: whatever the
peer library prints (Python or C) goes to stderr, so it can never break a reply. When
stdin closes without a ``close``, the backend is closed all the same (its temporary
directory deleted) and the driver exits.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TextIO


class Backend(Protocol):
    """One peer library behind the protocol."""

    info: dict[str, Any]

    def add(self, records: Sequence[dict[str, Any]]) -> None: ...

    def search(self, query: str, vector: list[float], k: int) -> list[str]: ...

    def close(self) -> None: ...


class Vectors:
    """The vectors the harness sent, by exact text: what the library's embedding
    model is replaced with. A text with no vector raises ``KeyError`` naming it, and is
    remembered in :attr:`misses` (for libraries that catch their embedder's errors)."""

    def __init__(self) -> None:
        self._by_text: dict[str, list[float]] = {}
        self.misses: list[str] = []

    def put(self, text: str, vector: Sequence[float]) -> None:
        self._by_text[text] = [float(x) for x in vector]

    def get(self, text: str) -> list[float]:
        try:
            return self._by_text[text]
        except KeyError:
            self.misses.append(text)
            raise KeyError(
                f"no vector was sent for the text {text[:80]!r}: the library asked to embed "
                "a text the harness did not embed"
            ) from None

    def forget(self, text: str) -> None:
        self._by_text.pop(text, None)

    def check(self) -> None:
        """Raise if the library asked for a text with no vector since the last check."""
        if self.misses:
            missed, self.misses = self.misses, []
            raise RuntimeError(
                f"the library asked to embed {len(missed)} text(s) with no vector sent, "
                f"first {missed[0][:80]!r}"
            )


def _writer() -> TextIO:
    """The protocol stream: a copy of the real stdout; fd 1 then points at stderr."""
    stream = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def serve(start: Callable[[], Backend], lines: Iterable[str] | None = None) -> int:
    """Run the protocol loop until ``close`` or end of input; returns the exit status."""
    out = _writer()

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    try:
        backend = start()
    except Exception as exc:
        traceback.print_exc()
        reply({"error": f"could not start: {type(exc).__name__}: {exc}"})
        return 1
    reply({"ready": True, **backend.info})
    closed = False
    try:
        for line in sys.stdin if lines is None else lines:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                op = request.get("op") if isinstance(request, dict) else None
                if op == "add":
                    backend.add(request["records"])
                    reply({"ok": True})
                elif op == "search":
                    k = int(request["k"])
                    reply({"ids": backend.search(request["query"], request["vector"], k)})
                elif op == "close":
                    closed = True
                    backend.close()
                    reply({"ok": True})
                    return 0
                else:
                    reply({"error": f"unknown op {op!r}: expected 'add', 'search' or 'close'"})
            except Exception as exc:
                traceback.print_exc()
                reply({"error": f"{type(exc).__name__}: {exc}"})
        return 0
    finally:
        if not closed:
            backend.close()
