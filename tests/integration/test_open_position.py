"""A store opening trusts its keyword index as it is when Chroma's log says nobody wrote
to the collection since the index was last in step with it, and reads nothing of the
collection then; any change behind the index's back is found on the next open.

The changes are made the way they happen: another store (its own index file) writing
while this one is closed, a plain ``chromadb`` client, a backup of the Chroma files put
back, the collection deleted and made again, rows deleted from the index file by hand,
and a stored position that is damaged. What the index holds is read through the public
API (conftest.indexed); whether an open read the collection is seen by counting the
Chroma reads of every id, on the real collection class.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import HybridMemory
from hybrid_memory._store.collection import ChromaCollection

from ..conftest import HashEmbedding, index_ids, indexed

CORPUS = [
    {"id": "a", "text": "the lighthouse keeper paints the stairs"},
    {"id": "b", "text": "a heron waits by the cold river"},
    {"id": "c", "text": "bread rises slowly in the warm kitchen"},
]


def open_store(path: Path, **kw: Any) -> HybridMemory:
    kw.setdefault("embedding", HashEmbedding())
    return HybridMemory(path, embedding_name="test-hash-64", **kw)


@pytest.fixture
def reads_of_every_id(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each time a collection reads every id (what a comparison of ids does)."""
    calls: list[str] = []
    original = ChromaCollection.all_ids

    def counted(self: ChromaCollection) -> set[str]:
        calls.append(self.name)
        return original(self)

    monkeypatch.setattr(ChromaCollection, "all_ids", counted)
    yield calls


def texts(store: HybridMemory) -> dict[str, str]:
    return {m.id: m.text for m in indexed(store)}


def keyword_ids(store: HybridMemory, query: str) -> list[str]:
    return [h.id for h in store.with_settings(sync_interval=1e9).search(query, alpha=0.0)]


def test_an_untouched_store_opens_without_reading_the_collection(
    tmp_path: Path, reads_of_every_id: list[str]
) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    reads_of_every_id.clear()
    for _ in range(2):
        with open_store(tmp_path) as store:
            assert index_ids(store) == {"a", "b", "c"}
            assert keyword_ids(store, "heron river")[0] == "b"
    assert reads_of_every_id == []


def test_writes_of_the_last_process_need_no_comparison_either(
    tmp_path: Path, reads_of_every_id: list[str]
) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    with open_store(tmp_path) as store:  # writes after an open that read nothing
        store.add("a fox crosses the frozen lake", id="d")
        store.update("a", text="the lighthouse keeper sweeps the stairs")
        store.delete("c")
    reads_of_every_id.clear()
    with open_store(tmp_path) as store:
        assert texts(store) == {
            "a": "the lighthouse keeper sweeps the stairs",
            "b": "a heron waits by the cold river",
            "d": "a fox crosses the frozen lake",
        }
    assert reads_of_every_id == []


def test_another_writer_while_closed_is_found_on_open(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    # Another agent with an index of its own (a second process would share the file;
    # its own file keeps this store's untouched): an add, an update, a delete.
    with open_store(tmp_path, index_path=str(tmp_path / "other.sqlite3")) as other:
        other.add("owls hunt over the meadow at dusk", id="d")
        other.update("b", text="a heron fishes in the cold river")
        other.delete("a")
    # And a plain Chroma client: a record without any of the store's metadata.
    collection = chromadb.PersistentClient(path=str(tmp_path)).get_collection("hybrid_memory")
    [vector] = HashEmbedding()(["a bare record about comets"])
    collection.add(ids=["raw"], embeddings=[vector], documents=["a bare record about comets"])
    with open_store(tmp_path) as store:
        assert texts(store) == {
            "b": "a heron fishes in the cold river",
            "c": "bread rises slowly in the warm kitchen",
            "d": "owls hunt over the meadow at dusk",
            "raw": "a bare record about comets",
        }
        assert keyword_ids(store, "comets")[0] == "raw"


def test_a_backup_of_the_collection_put_back_is_found_on_open(tmp_path: Path) -> None:
    store_path, backup = tmp_path / "store", tmp_path / "backup"
    with open_store(store_path) as store:
        store.add_many(CORPUS)
    # A backup of Chroma's files alone (the index file is not among them).
    shutil.copytree(store_path, backup, ignore=shutil.ignore_patterns("keyword-*"))
    time.sleep(0.01)  # the update below is stamped later than the backup's version
    with open_store(store_path) as store:
        store.add("owls hunt over the meadow at dusk", id="d")
        store.update("b", text="a heron fishes in the cold river")
        store.delete("a")
    for item in backup.iterdir():  # put back over the store's files
        target = store_path / item.name
        if target.is_dir():
            shutil.rmtree(target)
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy2(item, target)
    with open_store(store_path) as store:
        assert texts(store) == {item["id"]: item["text"] for item in CORPUS}
        assert keyword_ids(store, "heron fishes")[0] == "b"
        assert "d" not in keyword_ids(store, "owls meadow dusk")


def test_a_collection_made_again_under_its_name_is_found_on_open(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    with open_store(tmp_path, index_path=str(tmp_path / "other.sqlite3")) as other:
        chromadb.PersistentClient(path=str(tmp_path)).delete_collection("hybrid_memory")
    with open_store(tmp_path, index_path=str(tmp_path / "other.sqlite3")) as other:
        other.add("owls hunt over the meadow at dusk", id="d")
    with open_store(tmp_path) as store:
        assert texts(store) == {"d": "owls hunt over the meadow at dusk"}


def test_rows_deleted_from_the_index_file_are_found_on_open(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
        index_file = store.stats().index_path
    assert index_file is not None
    with sqlite3.connect(index_file) as conn:  # by hand, every table of the row at once
        (row,) = conn.execute("SELECT rowid FROM memories WHERE id = 'a'").fetchone()
        conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (row,))
        for table in ("memory_tags", "memory_meta", "memory_vectors", "memories"):
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (row,))
    with open_store(tmp_path) as store:
        assert index_ids(store) == {"a", "b", "c"}


def test_a_damaged_stored_position_is_compared_as_none(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
        index_file = store.stats().index_path
    assert index_file is not None
    collection = chromadb.PersistentClient(path=str(tmp_path)).get_collection("hybrid_memory")
    collection.delete(ids=["c"])
    with sqlite3.connect(index_file) as conn:
        conn.execute(
            "UPDATE index_state SET value = 'not:a|position' WHERE key = 'in_step_at_position'"
        )
        assert conn.total_changes == 1
    with open_store(tmp_path) as store:
        assert index_ids(store) == {"a", "b"}


def test_a_large_index_is_compared_in_the_background_while_it_answers(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    collection = chromadb.PersistentClient(path=str(tmp_path)).get_collection("hybrid_memory")
    collection.delete(ids=["a"])
    # Every index counts as large here: the comparison runs beside the searches.
    with open_store(tmp_path, warm_in_background=1) as store:
        hits = store.search("bread kitchen", alpha=0.0)
        assert hits[0].id == "c" and "keyword" in hits[0].ranks
        deadline = time.monotonic() + 20
        while "a" in index_ids(store):
            assert time.monotonic() < deadline, "the background comparison never ended"
            time.sleep(0.05)
        assert index_ids(store) == {"b", "c"}
