"""A write that commits after a later-stamped one (issue 45, found by the history checker).

On a server store each process keeps its own keyword index and catches up from the
collection. Process A stamps an update of a memory (its ``updated_at``, A's clock) and
sends it; meanwhile process B writes (stamped later) and catches up; then A's update
commits. B must show A's text by its next check all the same. Catching up "everything
stamped after the newest ``updated_at`` indexed" missed it for good: B's own write had
moved that past A's stamp, and an update changes no count, so nothing else brought it in.

A's slow request is played by a plain ``chromadb`` client writing the record as the
store would have, stamped before B's write: what the server sees of it is the same.
B is a real store with its own index cache, checking before each call
(``sync_interval=0``) or on its background clock.

An embedded path has the same race where a store keeps an index file of its own
(``index_path=``), as a second process would: there A's late commit is written through
the Chroma collection A's store opened (the path's one client; a second client on the
path would be unsafe), the one place this module reaches inside a store.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import HybridMemory
from hybrid_memory._model.records import UPDATED_KEY
from hybrid_memory._store import sync as _sync

from ..conftest import HashEmbedding, indexed


def open_store(kind: str, where: str, collection: str, own: Path, **kw: Any) -> HybridMemory:
    """A store of ``kind`` with a keyword index of its own (in ``own``)."""
    place = (
        {"url": where, "cache_dir": str(own)}
        if kind == "server"
        else {"path": where, "index_path": str(own / "index.sqlite3")}
    )
    own.mkdir(parents=True, exist_ok=True)
    return HybridMemory(
        **place,
        collection=collection,
        embedding=HashEmbedding(),
        embedding_name="test-hash-64",
        **kw,
    )


def raw_collection(kind: str, where: str, collection: str, writer: HybridMemory) -> Any:
    """The Chroma collection as a plain ``chromadb`` client sees it."""
    if kind == "server":
        host, port = where.removeprefix("http://").rsplit(":", 1)
        return chromadb.HttpClient(host=host, port=int(port)).get_collection(collection)
    return writer._parts.collection._collection


def commit_late(raw: Any, memory_id: str, text: str, stamped: float) -> None:
    """Commit an update of ``memory_id`` to ``text`` that was stamped at ``stamped``, as
    a store's write whose request reached Chroma late."""
    got = raw.get(ids=[memory_id], include=["metadatas", "embeddings"])
    metadata = {**got["metadatas"][0], UPDATED_KEY: stamped}
    raw.upsert(
        ids=[memory_id],
        documents=[text],
        metadatas=[metadata],
        embeddings=[list(got["embeddings"][0])],
    )


def keyword_texts(store: HybridMemory) -> dict[str, str]:
    """What the store's keyword index holds, by id (read without a check)."""
    return {m.id: m.text for m in indexed(store)}


@pytest.mark.parametrize("check", ["before each call", "in the background"])
@pytest.mark.parametrize("kind", [pytest.param("server", marks=pytest.mark.server), "embedded"])
def test_an_update_committed_after_a_later_stamped_write_is_seen_by_the_next_check(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, check: str
) -> None:
    where = request.getfixturevalue("chroma_server") if kind == "server" else str(tmp_path / "db")
    play_a_late_commit(kind, where, tmp_path, 0.0 if check == "before each call" else 0.2)


def test_with_more_stamps_in_the_window_than_a_check_names_it_compares_them_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``_STAMPS_NAMED`` of its own stamps in the window (a very busy store), a check
    reads the window's stamps and compares them itself, and the catch-up compares each
    row as it copies: the same outcome."""
    monkeypatch.setattr(_sync, "_STAMPS_NAMED", 0)
    play_a_late_commit("embedded", str(tmp_path / "db"), tmp_path, 0.2)


def play_a_late_commit(kind: str, where: str, tmp_path: Path, interval: float) -> None:
    collection = f"late-{uuid.uuid4().hex[:8]}"
    writer = open_store(kind, where, collection, tmp_path / "a")
    reader = open_store(kind, where, collection, tmp_path / "b", sync_interval=interval)
    try:
        late = writer.add("the harbour crane inspection is on monday").id
        other = writer.add("the lighthouse lamp was replaced").id
        reader.sync()
        stamped = time.time()  # A stamps its update of `late` and sends it ...
        time.sleep(0.05)
        reader.update(other, text="the lighthouse lamp was replaced again")  # B, stamped later
        reader.sync()  # ... B catches up: nothing of A's yet
        assert keyword_texts(reader)[late] == "the harbour crane inspection is on monday"
        new_text = "the harbour crane inspection moved to thursday"
        raw = raw_collection(kind, where, collection, writer)
        commit_late(raw, late, new_text, stamped)  # A's commit lands

        deadline = time.monotonic() + 10
        while True:
            reader.search("crane inspection thursday", k=3)  # a call: a check falls due
            if keyword_texts(reader)[late] == new_text:
                break
            assert time.monotonic() < deadline, "the late update never reached the index"
            time.sleep(0.1)
        hits = reader.search("crane inspection thursday", k=3)
        assert hits[0].id == late
        assert "keyword" in hits[0].ranks
        assert reader.get(late).text == new_text
    finally:
        reader.close()
        writer.close()
