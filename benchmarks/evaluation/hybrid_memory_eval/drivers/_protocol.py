"""The driver side of the foreign-peer protocol: JSON lines on stdin/stdout.

Imported by the driver scripts beside it, which run in a peer's own virtual environment
(``<venv>/bin/python <driver>.py``). Standard library only, and nothing from
``hybrid_memory``: that package is not installed in a peer's environment.

The driver answers one line per request, in order::

    (on start)                                           -> {"ready": true, "library": ..., ...}
    {"op": "add", "records": [{"id", "text", "tags", "metadata", "vector"}]} -> {"ok": true}
    {"op": "search", "query": str, "vector": [...], "k": int}             -> {"ids": [...]}
    {"op": "close"}                                                        -> {"ok": true}, exit 0

For the scale benchmark (``benchmarks/_scale``), which times the library and reads the
driver process's memory, a few optional fields and one more op::

    "add" with "one": true        the library's single-memory add (``backend.add_one``)
    "add" with "filter_fields"    these metadata fields stored so a search can filter on them
    "search" with "filter"        {field: value}: the library's own filtered search
    {"op": "rss", "reset": bool}  -> {"current_mb", "peak_mb"} of this process (reset:
                                     the peak high-water mark starts again from now)

and every ``add`` and ``search`` reply carries ``"s"``, the seconds spent inside the
backend call (the library's time, without the pipe and the JSON around it).

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
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TextIO


class Backend(Protocol):
    """One peer library behind the protocol."""

    info: dict[str, Any]

    def add(self, records: Sequence[dict[str, Any]]) -> dict[str, Any] | None: ...

    def search(self, query: str, vector: list[float], k: int) -> list[str]: ...

    # Optional, for the scale benchmark: ``add_one(record, filter_fields)``, ``add(records,
    # filter_fields)`` and ``search(query, vector, k, where)``, called with those
    # arguments only when a request carries them.

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


def _add_arguments(request: dict[str, Any]) -> dict[str, Any]:
    fields = request.get("filter_fields")
    return {"filter_fields": list(fields)} if fields else {}


def _method(backend: Backend, name: str) -> Callable[..., Any]:
    found = getattr(backend, name, None)
    if found is None:
        raise NotImplementedError(f"this driver has no {name!r}")
    return found


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> dict[str, Any]:
    """This process's resident memory now and its peak (MiB; Linux's /proc, else the
    peak alone from ``resource``)."""
    current, peak = _status_kb("VmRSS"), _status_kb("VmHWM")
    if peak is None:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "current_mb": None if current is None else round(current / 1024, 1),
        "peak_mb": round(peak / 1024, 1),
    }


def reset_peak_rss() -> bool:
    """Start the peak-RSS high-water mark again from now (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


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
                    extra = _add_arguments(request)
                    started = time.perf_counter()
                    if request.get("one"):
                        (record,) = request["records"]
                        stored = _method(backend, "add_one")(record, **extra)
                    else:
                        stored = backend.add(request["records"], **extra)
                    spent = time.perf_counter() - started
                    reply({"ok": True, "s": spent, **({} if stored is None else stored)})
                elif op == "search":
                    k = int(request["k"])
                    where = {"where": request["filter"]} if request.get("filter") else {}
                    started = time.perf_counter()
                    ids = backend.search(request["query"], request["vector"], k, **where)
                    reply({"ids": ids, "s": time.perf_counter() - started})
                elif op == "rss":
                    if request.get("reset"):
                        reset_peak_rss()
                    reply(rss_mb())
                elif op == "close":
                    closed = True
                    backend.close()
                    reply({"ok": True})
                    return 0
                else:
                    expected = "'add', 'search', 'rss' or 'close'"
                    reply({"error": f"unknown op {op!r}: expected {expected}"})
            except Exception as exc:
                traceback.print_exc()
                reply({"error": f"{type(exc).__name__}: {exc}"})
        return 0
    finally:
        if not closed:
            backend.close()
