"""Searching one of many namespaces without scanning the collection they share (issue
44, "ten thousand tenants"): Chroma's ``get`` by a ``where`` on the shared collection
costs 13-20 ms at 100,000 records, by a few ids ~1.5 ms. A small namespace's vector leg
reads its vectors by id, and a namespace closed in step and untouched since opens again
without reading its share; one that anybody wrote to meanwhile (another process through
the path's owner, another store of this process) is caught up. Real embedded Chroma."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, MemoryNotFoundError
from hybrid_memory._store.collection import ChromaCollection
from hybrid_memory._store.sync import IndexSync

from ..conftest import HashEmbedding

REPO = Path(__file__).resolve().parents[2]
_SCANS = frozenset({"get", "query", "delete", "count"})


def open_store(**kwargs: Any) -> HybridMemory:
    return HybridMemory(
        embedding=HashEmbedding(), embedding_name="test-hash-64", sync_interval=3600, **kwargs
    )


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """The calls of namespaces' shares that Chroma answers by a ``where`` over the whole
    shared collection (not by ids): ``(namespace key, operation)``."""
    seen: list[tuple[str, str]] = []
    original = ChromaCollection.call

    def call(self: ChromaCollection, operation: str, **kwargs: Any) -> Any:
        if self.partition is not None and operation in _SCANS and kwargs.get("ids") is None:
            seen.append((self.partition, operation))
        return original(self, operation, **kwargs)

    monkeypatch.setattr(ChromaCollection, "call", call)
    yield seen


def vector_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The ids of each read of vectors by id, from now on."""
    seen: list[list[str]] = []
    original = ChromaCollection.vectors_by_id

    def vectors_by_id(self: ChromaCollection, ids: Any) -> Any:
        seen.append(list(ids))
        return original(self, ids)

    monkeypatch.setattr(ChromaCollection, "vectors_by_id", vectors_by_id)
    return seen


def closed(memory: HybridMemory) -> None:
    """Wait until the namespaces evicted so far are closed (off the calls, in a thread)."""
    memory._parts._closer.submit(lambda: None).result()


def test_a_small_namespace_reads_its_vectors_by_id(
    tmp_path: Path, scans: list[tuple[str, str]]
) -> None:
    with open_store(path=tmp_path / "m") as memory:
        team = memory.namespace("team")
        ids = team.add_many([f"note {i} about the {w}" for i, w in enumerate("abcdefgh")])
        memory.namespace("other").add("note about the a", id="far")
        scans.clear()
        hits = team.search("note about the c", k=3)
        assert scans == []
        assert hits[0].id == ids[2] and "vector" in hits[0].ranks
        assert {h.id for h in hits} <= set(ids)
        hits = team.search("note", k=8, filter={"tags": {"$contains": "absent"}})
        assert hits == [] and scans == []


def test_a_namespace_closed_unchanged_opens_again_without_reading_its_share(
    tmp_path: Path, scans: list[tuple[str, str]]
) -> None:
    with open_store(path=tmp_path / "m", open_namespaces=1) as memory:
        first = memory.namespace("first")
        first.add("the first tenant keeps zebras", id="z")
        for name in ("second", "third"):  # writes elsewhere on the path: not first's
            memory.namespace(name).add(f"the {name} tenant keeps otters", id="z")
        closed(memory)
        assert memory._parts.open_count() == 1
        scans.clear()
        hits = first.search("zebras", k=3)
        assert scans == []
        assert [h.id for h in hits] == ["z"] and hits[0].text == "the first tenant keeps zebras"
        assert first.stats().in_step


def test_a_closed_namespace_written_by_another_process_is_caught_up_on_opening(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m"
    with open_store(path=path, open_namespaces=1) as memory:
        team = memory.namespace("team")
        team.add("written here", id="here")
        memory.namespace("other").add("not the team", id="there")
        closed(memory)
        script = (
            "import sys; sys.path.insert(0, sys.argv[2])\n"
            "from tests.conftest import HashEmbedding\n"
            "from hybrid_memory import HybridMemory\n"
            "with HybridMemory(path=sys.argv[1],"
            " embedding=HashEmbedding(), embedding_name='test-hash-64') as m:\n"
            "    t = m.namespace('team')\n"
            "    t.add('written by the other process about zebras', id='there')\n"
            "    t.delete('here')\n"
        )
        subprocess.run([sys.executable, "-c", script, str(path), str(REPO)], check=True)
        # No sync asked for: opening the closed namespace again catches up.
        assert [h.id for h in team.search("zebras", k=3)] == ["there"]
        with pytest.raises(MemoryNotFoundError):
            team.get("here")
        assert team.count() == 1 and team.stats().in_step


def test_a_closed_namespace_written_by_another_store_of_this_process_is_caught_up(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m"
    with open_store(path=path, open_namespaces=1) as memory, open_store(path=path) as beside:
        team = memory.namespace("team")
        team.add("written here", id="here")
        memory.namespace("other").add("not the team", id="there")
        closed(memory)
        beside.namespace("team").add("written beside about zebras", id="beside")
        beside.namespace("team").delete("here")
        assert [h.id for h in team.search("zebras", k=3)] == ["beside"]
        with pytest.raises(MemoryNotFoundError):
            team.get("here")
        assert team.count() == 1 and team.stats().in_step


def test_a_closed_namespace_written_meanwhile_is_caught_up_in_one_read_of_its_share(
    tmp_path: Path, scans: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a server every namespace opened again is compared id by id (nobody counts the
    # writes): its records read once serve the copy and the ids, where a read of the
    # changed records and one of every id were two scans of the shared collection.
    path = tmp_path / "m"
    with open_store(path=path, open_namespaces=1) as memory, open_store(path=path) as beside:
        team = memory.namespace("team")
        team.add_many([f"note {i} about otters" for i in range(5)])
        team.add("written here", id="here")
        memory.namespace("other").add("not the team", id="there")
        closed(memory)
        beside.namespace("team").add("written beside about zebras", id="beside")
        beside.namespace("team").delete("here")
        scans.clear()
        by_id = vector_reads(monkeypatch)
        team = memory.namespace("team")
        assert [op for _, op in scans] == ["get"]
        # Its vectors came with that read: its first search reads none (its next ones do).
        assert team.search("zebras", k=3)[0].id == "beside"
        assert by_id == []
        with pytest.raises(MemoryNotFoundError):
            team.get("here")
        assert team.count() == 6 and team.stats().in_step
        team.search("otters", k=3)
        assert len(by_id) == 1


def test_a_vector_kept_from_that_read_is_not_used_once_its_memory_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m"
    with open_store(path=path, open_namespaces=1) as memory, open_store(path=path) as beside:
        team = memory.namespace("team")
        ids = team.add_many([f"note {i} about otters" for i in range(5)])
        memory.namespace("other").add("not the team", id="there")
        closed(memory)
        beside.namespace("team").add("written beside", id="beside")  # not in step: read
        by_id = vector_reads(monkeypatch)
        team = memory.namespace("team")
        # Between that read and the first search, another store changes a memory's text.
        beside.namespace("team").update(ids[2], text="a violin concerto in the park")
        hits = team.search("a violin concerto in the park", alpha=1.0, k=1)
        assert len(by_id) == 1  # the kept vectors were not taken: one was out of date
        assert hits[0].id == ids[2] and hits[0].scores["vector"] == pytest.approx(1.0)


def test_a_memory_written_between_that_read_and_the_ids_compare_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ids of that one read are older than the index's, read next: a memory another
    # store writes in between is in the index and not in the read. It is not stale (the
    # collection, asked again inside the index's delete, has it).
    path = tmp_path / "m"
    with open_store(path=path, open_namespaces=1) as memory, open_store(path=path) as beside:
        team = memory.namespace("team")
        team.add("written here", id="here")
        memory.namespace("other").add("not the team", id="there")
        closed(memory)
        beside.namespace("team").add("written beside", id="beside")
        original = IndexSync._reconcile

        def reconcile(self: IndexSync, in_collection: set[str] | None = None) -> bool:
            if in_collection is not None and "bell" not in in_collection:
                beside.namespace("team").add("the tower bell rings at noon", id="bell")
            return original(self, in_collection)

        monkeypatch.setattr(IndexSync, "_reconcile", reconcile)
        team = memory.namespace("team")
        monkeypatch.undo()
        assert [h.id for h in team.search("tower bell", alpha=0.0, k=1)] == ["bell"]
        assert team.count() == 3 and {m.id for m in team.list_memories()} == {
            "here",
            "beside",
            "bell",
        }


def test_a_namespace_with_a_new_index_file_reads_its_share_once(
    tmp_path: Path, scans: list[tuple[str, str]]
) -> None:
    path = tmp_path / "m"
    with open_store(path=path) as memory:
        ids = memory.namespace("team").add_many([f"note {i} about otters" for i in range(7)])
    for file in path.glob("keyword-*.ns.team.*"):
        file.unlink()  # derived state: filled again from the collection
    with open_store(path=path) as memory:
        scans.clear()
        team = memory.namespace("team")
        assert len(scans) == 1  # its records, in one page: no page after, no id reread
        assert {h.id for h in team.search("otters", k=10)} == set(ids)
        assert team.stats().in_step


def test_a_namespace_index_file_keeps_no_copy_of_the_vectors(tmp_path: Path) -> None:
    """Disk (10,000 tenants): a namespace's search reads its vectors from Chroma, so its
    index file keeps none (11 of the 37 KiB of ten memories of 384 dimensions); the
    store's own index keeps its copy for the feedback step."""
    path = tmp_path / "m"
    with open_store(path=path) as memory:
        memory.add("the store's own note about otters", id="own")
        team = memory.namespace("team")
        ids = team.add_many([f"note {i} about otters" for i in range(5)])
        hits = team.search("note 3 about otters", k=3)
        assert hits[0].id == ids[3] and "vector" in hits[0].ranks
    kept = {}
    for file in path.glob("keyword-*.sqlite3"):
        conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        kept[".ns.team." in file.name] = conn.execute(
            "SELECT count(*) FROM memory_vectors"
        ).fetchone()[0]
        conn.close()
    assert kept == {True: 0, False: 1}
