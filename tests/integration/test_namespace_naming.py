"""A namespace's name is recorded by its first write, in the same Chroma call as its
memories (issue 44, creating a namespace within 50 ms beyond Chroma's add): no second
write to a registry when a namespace is created, and never a namespace holding memories
that the listing misses, whatever stops the process. Real embedded Chroma, real
processes killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory
from hybrid_memory._shared_path.server import WRITE_OPERATIONS
from hybrid_memory._store.collection import ChromaCollection

from ..conftest import HashEmbedding

REPO = Path(__file__).resolve().parents[2]


def open_store(**kwargs: Any) -> HybridMemory:
    return HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **kwargs)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every Chroma write made through a collection: ``(Chroma collection, operation)``."""
    seen: list[tuple[str, str]] = []
    original = ChromaCollection.call

    def call(self: ChromaCollection, operation: str, **kwargs: Any) -> Any:
        if operation in WRITE_OPERATIONS and operation != "modify":
            seen.append((self._chroma_name, operation))
        return original(self, operation, **kwargs)

    monkeypatch.setattr(ChromaCollection, "call", call)
    yield seen


def test_creating_a_namespace_is_one_chroma_write(
    tmp_path: Path, writes: list[tuple[str, str]]
) -> None:
    with open_store(path=tmp_path / "m") as store:
        store.namespace("warm").add("the shared collection made")
        writes.clear()
        store.namespace("alice").add_many([{"text": "alice likes tea"}, {"text": "and rain"}])
        # Its memories and its name in one add (there was an upsert to the registry too).
        assert writes == [("hybrid_memory.namespaces", "add")]
        store.namespace("alice").add("a second write carries no name")
        assert writes[1:] == [("hybrid_memory.namespaces", "add")]
        assert store.namespaces() == ["alice", "warm"]
        store.namespace("empty")
        assert store.namespaces() == ["alice", "empty", "warm"]  # named here, not yet written
    with open_store(path=tmp_path / "m") as again:
        # Closed empty, it was named in the registry: listed by any store or process.
        assert again.namespaces() == ["alice", "empty", "warm"]
        assert again.namespace("alice").count() == 3
        assert [h.text for h in again.namespace("alice").search("tea", k=1)] == ["alice likes tea"]


def test_the_name_record_is_read_by_no_namespace(tmp_path: Path) -> None:
    with open_store(path=tmp_path / "m") as store:
        a = store.namespace("a")
        a.add("apples in the garden", id="x", tags=["fruit"])
        assert a.count() == 1 and [m.id for m in a.list_memories()] == ["x"]
        assert [h.id for h in a.search("a", k=10)] == ["x"]
        assert a.tags() == ["fruit"]
        nested = a.namespace("a")  # a name the parent's name record also holds
        assert nested.count() == 0 and nested.search("apples", k=5) == []
        assert store.count() == 0 and store.search("apples", k=5) == []


_WRITER = """
import sys
sys.path.insert(0, sys.argv[2])
from hybrid_memory import HybridMemory
from tests.conftest import HashEmbedding
m = HybridMemory(path=sys.argv[1], embedding=HashEmbedding(), embedding_name="test-hash-64")
i = int(sys.argv[3])
while True:
    m.namespace(f"t{i}").add_many([{"text": f"tenant {i} note {j}"} for j in range(5)])
    print(i, flush=True)
    i += 1
"""


def test_a_process_killed_while_creating_namespaces_leaves_none_unlisted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m"
    started = 0
    for delay in (0.0, 0.013, 0.029, 0.047):  # killed at different moments of a write
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(REPO), str(started)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        assert proc.stdout is not None
        done = [proc.stdout.readline() for _ in range(3)]  # three namespaces acknowledged
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        started = int(done[-1]) + 1
        # Whatever it was writing then: one more namespace, or a name with no memory.
        started += 20
    with open_store(path=path) as store:
        listed = set(store.namespaces())  # before any namespace is opened here
        holding = set()
        for i in range(started):
            name = f"t{i}"
            if store.namespace(name).count():
                holding.add(name)
        assert len(holding) >= 12  # three acknowledged per process, at least
        assert holding <= listed
