"""The core's doors (issue 25) and namespace isolation (issue 21, item 3):
``HybridMemory.namespace``, ``existing`` and ``stats``, on real Chroma (embedded, in
memory and a ``chroma run`` server) and the real SQLite index."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import (
    DuplicateIdError,
    HybridMemory,
    InvalidInputError,
    MemoryNotFoundError,
    StoreError,
    StoreStats,
)

from ..conftest import HashEmbedding


def open_store(**kwargs: Any) -> HybridMemory:
    return HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **kwargs)


@pytest.fixture(params=["in-memory", "embedded"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HybridMemory]:
    kwargs: dict[str, Any] = {"path": tmp_path / "m"} if request.param == "embedded" else {}
    with open_store(**kwargs) as memory:
        yield memory


def test_an_id_of_one_namespace_never_addresses_another(store: HybridMemory) -> None:
    """Issue 21, item 3: namespace A + id "sub:k" and namespace "A:sub" + id "k" were one
    memory under the MCP server's prefix scheme."""
    a, a_sub = store.namespace("A"), store.namespace("A:sub")
    a.add("the deploy key is in the vault", id="sub:k")
    a_sub.add("a different memory", id="k")  # no DuplicateIdError: another namespace
    a_sub.add("replaced, in A:sub only", id="k", upsert=True)
    assert a.get("sub:k").text == "the deploy key is in the vault"
    assert a_sub.get("k").text == "replaced, in A:sub only"
    with pytest.raises(MemoryNotFoundError):
        a.get("k")
    with pytest.raises(MemoryNotFoundError):
        a_sub.get("sub:k")
    with pytest.raises(MemoryNotFoundError):
        store.get("sub:k")  # the store itself is a namespace of its own
    assert store.count() == 0 and a.count() == 1 and a_sub.count() == 1
    with pytest.raises(DuplicateIdError):
        a.add("again", id="sub:k")


def test_tags_counts_and_deletes_stay_in_their_namespace(store: HybridMemory) -> None:
    alice, bob = store.namespace("alice"), store.namespace("bob")
    alice.add_many([{"text": "likes dark mode", "tags": ["ui"], "metadata": {"n": 1}}])
    bob.add_many(
        [
            {"text": "deploys on fridays", "tags": ["ops"], "metadata": {"n": 1}},
            {"text": "secret project", "tags": ["secret"], "metadata": {"n": 2}},
        ]
    )
    assert alice.tags() == ["ui"] and bob.tags() == ["ops", "secret"]
    assert alice.count() == 1 and bob.count() == 2
    assert alice.count({"n": 1}) == 1 and alice.count({"n": 2}) == 0
    # A tag of another namespace is not "known" here: it is not matched in a query.
    assert alice.search("secret ops").matched_tags == ()
    assert [m.text for m in alice.list_memories()] == ["likes dark mode"]
    assert alice.delete(filter={"n": {"$gte": 0}}) == 1
    assert bob.count() == 2  # the filter delete stayed in alice's namespace
    assert {h.text for h in bob.search("fridays secret", k=5)} == {
        "deploys on fridays",
        "secret project",
    }
    assert list(alice.search("fridays secret")) == []


def test_keyword_scores_of_a_namespace_do_not_move_when_another_grows(
    store: HybridMemory,
) -> None:
    """BM25 statistics (document count, document frequencies) are per namespace."""
    a, b = store.namespace("a"), store.namespace("b")
    a.add_many(["the river flows to the sea", "mountain air is thin", "a river stone"])

    def keyword_scores() -> dict[str, float]:
        return {h.id: h.scores["keyword"] for h in a.search("river", k=5) if "keyword" in h.scores}

    before = keyword_scores()
    b.add_many([f"river note {i}" for i in range(40)])
    assert keyword_scores() == before


def test_namespaces_nest_and_name_any_string(store: HybridMemory) -> None:
    team = store.namespace("team")
    alice_in_team = team.namespace("alice")
    alice = store.namespace("alice")
    alice_in_team.add("nested memory", id="x")
    assert alice_in_team.namespace_path == ("team", "alice")
    assert alice.count() == 0 and team.count() == 0
    odd = store.namespace("ünïcode / with spaces: and 'quotes' ..")
    odd.add("odd name", id="x")
    assert odd.get("x").text == "odd name"
    assert store.namespace("team").namespace("alice").get("x").text == "nested memory"


def test_asking_again_shares_the_open_namespace(store: HybridMemory) -> None:
    first = store.namespace("n")
    first.add("shared", id="s")
    again = store.with_settings(k=2).namespace("n")
    assert again.get("s").text == "shared"
    assert again.settings.k == 2  # the caller's search settings carry into the view
    assert again._parts is first._parts  # one collection and one index per name


@pytest.mark.parametrize("bad", ["", None, 7])
def test_a_bad_namespace_name_is_refused(store: HybridMemory, bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="namespace"):
        store.namespace(bad)


def test_namespaces_persist_on_disk_each_with_its_own_index(tmp_path: Path) -> None:
    path = tmp_path / "m"
    with open_store(path=path) as memory:
        memory.namespace("A").add("kept across a reopen", id="k", tags=["kept"])
        memory.add("in the store itself", id="k")
        files = sorted(p.name for p in path.glob("keyword-*.sqlite3"))
    assert len(files) == 2  # the store's index and namespace A's
    with open_store(path=path) as memory:
        a = memory.namespace("A")
        assert a.get("k").text == "kept across a reopen"
        assert a.tags() == ["kept"]
        assert memory.get("k").text == "in the store itself"
        assert a.stats().in_step


def test_an_explicit_index_file_is_not_shared_by_namespaces(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite3"
    with open_store(path=tmp_path / "m", index_path=str(index)) as memory:
        a, b = memory.namespace("a"), memory.namespace("b")
        a.add("only in a", id="x")
        b.add("only in b", id="x")
        paths = {memory.stats().index_path, a.stats().index_path, b.stats().index_path}
        assert len(paths) == 3 and str(index) in paths
        assert all(Path(p).exists() for p in paths if p)
        assert a.get("x").text == "only in a" and b.get("x").text == "only in b"


def test_closing_the_store_closes_its_namespaces(tmp_path: Path) -> None:
    memory = open_store(path=tmp_path / "m")
    view = memory.namespace("a")
    view.add("x", id="x")
    view.close()  # a view closes nothing: the store owns it
    assert view.get("x").text == "x"
    memory.close()
    with pytest.raises(StoreError, match="closed"):
        memory.namespace("b")
    # Reopening finds everything (nothing was lost by closing).
    with open_store(path=tmp_path / "m") as again:
        assert again.namespace("a").get("x").text == "x"


def test_a_private_in_memory_store_drops_its_namespaces_on_close() -> None:
    client = chromadb.EphemeralClient()  # the store's own in-memory Chroma, in-process
    before = {c.name for c in client.list_collections()}
    memory = open_store()
    memory.namespace("a").add("temporary")
    during = {c.name for c in client.list_collections()} - before
    # The store's private collection and the one its namespaces share (naming them too:
    # a namespace is named by its first write; the registry only holds empty ones).
    assert len(during) == 2
    memory.namespace("empty")
    memory.namespace("b").add("temporary too")
    memory.close()
    assert {c.name for c in client.list_collections()} - before == set()


def test_namespaces_on_a_chroma_server(chroma_server: str) -> None:
    collection = f"ns-{uuid.uuid4().hex[:8]}"
    with open_store(url=chroma_server, collection=collection) as one:
        one.namespace("A").add("server memory of A", id="sub:k", tags=["a-tag"])
        one.namespace("A:sub").add("server memory of A:sub", id="k")
    # Another agent (process) on the same server sees the same namespaces, apart.
    with open_store(url=chroma_server, collection=collection) as other:
        assert other.namespace("A").get("sub:k").text == "server memory of A"
        assert other.namespace("A:sub").get("k").text == "server memory of A:sub"
        assert other.namespace("A:sub").tags() == []
        stats = other.namespace("A").stats()
        assert (stats.kind, stats.location, stats.count) == ("server", chroma_server, 1)
        # A server store keeps its keyword index in a cache file; each namespace its own.
        assert stats.index_path is not None
        assert stats.index_path != other.namespace("A:sub").stats().index_path
        assert other.count() == 0


# --- existing ------------------------------------------------------------------------


def test_existing_answers_which_ids_exist(store: HybridMemory) -> None:
    store.add_many([{"text": f"memory {i}", "id": f"m{i}"} for i in range(5)])
    assert store.existing(["m1", "nope", "m3", "m1"]) == {"m1", "m3"}
    assert store.existing("m4") == {"m4"}
    assert store.existing([]) == set()
    assert store.namespace("other").existing(["m1"]) == set()


def test_existing_pages_through_many_ids(store: HybridMemory) -> None:
    store.add_many([{"text": f"memory {i}", "id": f"m{i}"} for i in range(30)])
    asked = [f"m{i}" for i in range(12_000)]  # more than one Chroma page of ids
    assert store.existing(asked) == {f"m{i}" for i in range(30)}


@pytest.mark.parametrize("bad", [None, 3, b"m1", ["m1", 2], [""]])
def test_existing_refuses_bad_ids(store: HybridMemory, bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="ids"):
        store.existing(bad)


# --- stats -------------------------------------------------------------------------


def test_stats_of_a_store_and_of_a_namespace(tmp_path: Path) -> None:
    path = tmp_path / "m"
    with open_store(path=path) as memory:
        empty = memory.stats()
        assert isinstance(empty, StoreStats)
        assert (empty.count, empty.indexed, empty.tags, empty.dimension) == (0, 0, 0, None)
        memory.add_many(
            [{"text": "one", "tags": ["x", "y"]}, {"text": "two", "tags": ["y"]}, "three"]
        )
        ns = memory.namespace("team")
        ns.add("four", tags=["z"])
        stats = memory.stats()
        assert (stats.count, stats.indexed, stats.tags) == (3, 3, 2)
        assert stats.in_step
        assert (stats.kind, stats.location) == ("embedded", str(path))
        assert stats.collection == "hybrid_memory"
        assert stats.index_path == str(path / "keyword-hybrid_memory.sqlite3")
        assert (stats.embedding, stats.dimension) == ("test-hash-64", 64)
        assert stats.namespace == ()
        assert stats.sync_interval == memory.settings.sync_interval
        scoped = ns.stats()
        assert (scoped.count, scoped.indexed, scoped.tags, scoped.namespace) == (
            1,
            1,
            1,
            ("team",),
        )
        assert scoped.collection.startswith("hybrid_memory.ns.team.")
        assert scoped.index_path == str(path / f"keyword-{scoped.collection}.sqlite3")


def test_stats_reports_an_index_behind_the_collection(
    store_and_collection: tuple[HybridMemory, Any],
) -> None:
    store, raw = store_and_collection
    store.add("indexed", id="a")
    # Another process writes to the collection; this store's index has not caught up.
    raw.add(ids=["b"], documents=["behind"], embeddings=[[0.1] * 64])
    stats = store.with_settings(sync_interval=1e9).stats()
    assert (stats.count, stats.indexed, stats.in_step, stats.kind) == (2, 1, False, "client")
