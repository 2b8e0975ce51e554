"""One agent process on a shared embedded store, driven line by line over stdin/stdout
by tests/integration/test_multiprocess.py (JSON in, JSON out).

Run as ``python _agent.py PATH``. It opens ``HybridMemory(path=PATH)`` with the seeded
embedding (a memory's own text finds it at similarity 1, so a vector miss is a real
miss) and answers one JSON command per line:

- ``{"op": "role"}``: ``{"owner": bool}``, whether this process owns the path;
- ``{"op": "add", "text", "metadata", "on_similar"}``: the add's id, outcome, whether
  it stored, and the similar memories it found (``[[id, similarity], ...]``);
- ``{"op": "add_many", "texts": [...]}``, ``{"op": "update", "id", "text"}``,
  ``{"op": "delete", "ids": [...]}``, ``{"op": "count"}``, ``{"op": "sync"}``;
- ``{"op": "find", "text": ..., "token": ...}``: the ranks of the memory whose text is
  ``text`` in a search for its own text (vector) and for ``token`` (keyword);
- ``{"op": "write_for", "seconds": s, "prefix": p}``: adds one memory at a time in a
  background thread for ``s`` seconds, each appended to ``acked-<prefix>.jsonl`` once
  the call returned (acknowledged); ``{"op": "wait_writes"}`` joins it and answers the
  number acknowledged and the errors seen (by type);
- ``{"op": "close"}``: closes the store and exits.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hybrid_memory import HybridMemory
from tests.conftest import SeededEmbedding

NAME = "seeded-64"


def open_store(path: str, **overrides: Any) -> HybridMemory:
    return HybridMemory(
        path=path, embedding=SeededEmbedding(), embedding_name=NAME, sync_interval=0.5, **overrides
    )


class Agent:
    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.memory = open_store(path)
        self.writer: threading.Thread | None = None
        self.acked = 0
        self.errors: dict[str, int] = {}
        self.first_error: str | None = None

    def find(self, text: str, token: str) -> dict[str, Any]:
        by_vector = {h.text: h.ranks for h in self.memory.search(text, k=10)}
        by_keyword = {h.text: h.ranks for h in self.memory.search(token, k=10)}
        return {
            "vector": by_vector.get(text, {}).get("vector"),
            "keyword": by_keyword.get(text, {}).get("keyword"),
        }

    def write_for(self, seconds: float, prefix: str) -> None:
        deadline = time.monotonic() + seconds
        log = (self.path.parent / f"acked-{prefix}.jsonl").open("a")
        serial = 0
        while time.monotonic() < deadline:
            token = f"zq{prefix}x{serial}"
            text = f"note {serial} written by {prefix} under load {token}"
            serial += 1
            try:
                memory_id = self.memory.add(text)
            except Exception as error:
                name = type(error).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
                self.first_error = self.first_error or traceback.format_exc()
                continue
            log.write(json.dumps({"id": memory_id, "text": text, "token": token}) + "\n")
            log.flush()
            self.acked += 1
        log.close()

    def handle(self, command: dict[str, Any]) -> Any:
        op = command["op"]
        memory = self.memory
        if op == "role":
            return {"owner": memory._parts.collection._ownership.is_owner}
        if op == "add_many":
            return memory.add_many(command["texts"])
        if op == "add":
            added = memory.add(
                command["text"],
                metadata=command.get("metadata"),
                on_similar=command.get("on_similar"),
            )
            return {
                "id": added.id,
                "outcome": added.outcome,
                "stored": added.stored,
                "similar": [list(found) for found in added.similar],
            }
        if op == "update":
            memory.update(command["id"], text=command["text"])
            return True
        if op == "delete":
            return memory.delete(command["ids"])
        if op == "count":
            return memory.count()
        if op == "sync":
            memory.sync(full=True)
            return True
        if op == "find":
            return self.find(command["text"], command["token"])
        if op == "write_for":
            self.writer = threading.Thread(
                target=self.write_for, args=(command["seconds"], command["prefix"])
            )
            self.writer.start()
            return True
        if op == "wait_writes":
            if self.writer is not None:
                self.writer.join()
            return {"acked": self.acked, "errors": self.errors, "first": self.first_error}
        raise ValueError(f"unknown op {op!r}")


def main() -> None:
    agent = Agent(sys.argv[1])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "close":
            agent.memory.close()
            print(json.dumps({"ok": True}), flush=True)
            return
        try:
            reply = {"ok": agent.handle(command)}
        except Exception as error:
            reply = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
