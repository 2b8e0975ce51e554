"""The BaseStore contract, checked against LangGraph's own InMemoryStore as the reference.

The installed LangGraph packages ship no store conformance suite (langgraph,
langgraph-checkpoint and langgraph-sdk were searched; langchain-tests'
``base_store.py`` tests LangChain's key-value ``langchain_core.stores.BaseStore``,
another interface), so every test here runs
the same operations on an ``InMemoryStore`` (indexed with the same embedding model)
and on a ``HybridMemoryStore`` over real Chroma in a temporary directory, and
compares what a user sees: namespaces, keys and values, in order, except the
ranking of searches with a query (there the same items must come back).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.hybrid_memory import HybridMemoryStore
from langgraph.store.memory import InMemoryStore

from hybrid_memory import HybridMemory


@pytest.fixture(scope="module")
def embedder() -> Any:
    """The real default model (all-MiniLM-L6-v2, offline), loaded once for the module."""
    memory = HybridMemory()
    memory.embedder.embed_query("warm up")
    yield memory.embedder
    memory.close()


class Pair:
    """The reference store and ours, driven with the same calls."""

    def __init__(self, embedder: Any, path: Path) -> None:
        self.reference = InMemoryStore(
            index={"dims": 384, "embed": embedder.embed_documents, "fields": ["$"]}
        )
        self.ours = HybridMemoryStore(path=path, embedding=embedder)

    def both(self, call: Callable[[BaseStore], Any]) -> tuple[Any, Any]:
        return call(self.reference), call(self.ours)

    def same(self, call: Callable[[BaseStore], Any]) -> Any:
        """Run ``call`` on both; what a user sees must be equal. Returns ours."""
        ref, ours = self.both(call)
        assert visible(ours) == visible(ref)
        return ours


def visible(result: Any) -> Any:
    """What a user sees of a result, timestamps and scores aside."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [visible(r) for r in result]
    return result


@pytest.fixture
def pair(embedder: Any, tmp_path: Path) -> Iterator[Pair]:
    p = Pair(embedder, tmp_path / "store")
    yield p
    p.ours.close()


FILL: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("a",), "k1", {"text": "the cat sleeps on the mat", "n": 1, "tag": "x"}),
    (("a",), "k2", {"text": "stock prices fell sharply", "n": 2, "tag": "y"}),
    (("a", "b"), "k1", {"text": "a recipe for lemon cake", "n": 3, "tag": "x"}),
    (("a", "b"), "k3", {"text": "the dog chased the cat", "n": 4, "tag": "y"}),
    (("ab",), "k1", {"text": "the cat sleeps on the mat", "n": 5, "tag": "x"}),
    (("c", "b", "a"), "k9", {"text": "mountains and rivers", "n": 6, "tag": "z"}),
]


def fill(store: BaseStore) -> None:
    """One namespace at a time (both stores then list in the same order), in one batch."""
    store.batch([PutOp(ns, key, value) for ns, key, value in FILL])


# --- put / get / update / delete ---------------------------------------------------------


def test_put_get_update_delete(pair: Pair) -> None:
    value = {"text": "Alice likes tea", "nested": {"deep": [1, 2.5, {"x": None}]}, "ok": True}
    pair.both(lambda s: s.put(("users", "alice"), "pref", value))
    got = pair.same(lambda s: s.get(("users", "alice"), "pref"))
    assert got.value == value and isinstance(got.value["nested"]["deep"][1], float)
    pair.same(lambda s: s.get(("users", "alice"), "missing"))
    pair.same(lambda s: s.get(("users", "bob"), "pref"))
    first = got
    time.sleep(0.01)
    pair.both(lambda s: s.put(("users", "alice"), "pref", {"text": "Alice likes coffee now"}))
    updated = pair.same(lambda s: s.get(("users", "alice"), "pref"))
    # One memory per key: the update replaced it (and kept its creation time, as
    # LangGraph's Postgres store does; InMemoryStore resets it).
    assert pair.ours.memory.count() == 1
    assert updated.created_at == first.created_at
    assert updated.updated_at > first.updated_at
    pair.both(lambda s: s.delete(("users", "alice"), "pref"))
    assert pair.same(lambda s: s.get(("users", "alice"), "pref")) is None
    pair.both(lambda s: s.delete(("users", "alice"), "never-there"))  # a no-op, no error
    assert pair.ours.memory.count() == 0


def test_reopened_from_disk_sees_everything(embedder: Any, tmp_path: Path) -> None:
    with HybridMemoryStore(path=tmp_path, embedding=embedder) as store:
        fill(store)
        before = store.search(("a",), limit=100)
    with HybridMemoryStore(path=tmp_path, embedding=embedder) as store:
        assert store.search(("a",), limit=100) == before
        assert store.get(("a", "b"), "k3").value["n"] == 4  # type: ignore[union-attr]
        assert store.list_namespaces() == [("a",), ("a", "b"), ("ab",), ("c", "b", "a")]
        hits = store.search(("a", "b"), query="a dessert with citrus")
        assert hits[0].key == "k1" and hits[0].namespace == ("a", "b")


# --- namespaces --------------------------------------------------------------------------


def test_namespace_isolation_including_prefixes_of_one_another(pair: Pair) -> None:
    pair.both(fill)
    for prefix in [("a",), ("a", "b"), ("ab",), ("b",), ("a", "b", "c"), ()]:
        found = pair.same(lambda s, p=prefix: s.search(p, limit=100))
        assert all(item.namespace[: len(prefix)] == prefix for item in found)
    # The same text in ("a",) and ("ab",): a search in one never sees the other.
    hits = pair.ours.search(("ab",), query="the cat sleeps on the mat", limit=10)
    assert [(h.namespace, h.key) for h in hits] == [(("ab",), "k1")]
    hits = pair.ours.search(("a", "b"), query="the cat sleeps on the mat", limit=10)
    assert {h.namespace for h in hits} == {("a", "b")}
    assert {h.key for h in hits} == {"k1", "k3"}
    assert pair.same(lambda s: s.get(("a",), "k3")) is None  # k3 lives in ("a", "b")
    assert pair.same(lambda s: s.get(("a", "b"), "k2")) is None
    pair.both(lambda s: s.delete(("a",), "k1"))  # deletes only ("a",)'s k1
    pair.same(lambda s: s.get(("a", "b"), "k1"))
    pair.same(lambda s: s.get(("ab",), "k1"))
    pair.same(lambda s: s.search(("a",), limit=100))


NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


LIST_OPTIONS: list[dict[str, Any]] = [
    {},
    {"prefix": ("a", "b")},
    {"prefix": ("a", "b"), "max_depth": 3},
    {"prefix": ("a",), "max_depth": 2},
    {"suffix": ("f",)},
    {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("a", "*", "f")},
    {"prefix": ("*", "b")},
    {"suffix": ("*", "f")},
    {"suffix": ("b", "*", "*")},
    {"prefix": ("users",)},
    {"suffix": ("users",)},
    {"prefix": ("nothing",)},
    {"max_depth": 1},
    {"max_depth": 2, "limit": 3},
    {"limit": 2, "offset": 3},
    {"offset": 100},
    {"prefix": ("a", "b"), "limit": 1, "offset": 1},
]


def put_namespaces(s: BaseStore) -> None:
    s.batch([PutOp(ns, f"k{i}", {"text": f"item {i}"}) for i, ns in enumerate(NAMESPACES)])


def test_list_namespaces(pair: Pair) -> None:
    pair.both(put_namespaces)
    for options in LIST_OPTIONS:
        pair.same(lambda s, o=options: s.list_namespaces(**o))


def test_list_namespaces_op_with_both_conditions(pair: Pair) -> None:
    pair.both(put_namespaces)
    op = ListNamespacesOp(
        match_conditions=(
            MatchCondition("prefix", ("a", "*")),
            MatchCondition("suffix", ("*", "f")),
        ),
        max_depth=3,
    )
    pair.same(lambda s: s.batch([op])[0])


def test_a_namespace_whose_items_were_all_deleted_is_no_longer_listed(pair: Pair) -> None:
    pair.both(fill)
    pair.both(lambda s: s.delete(("ab",), "k1"))
    # As in LangGraph's Postgres and SQLite stores; InMemoryStore keeps the empty one.
    assert ("ab",) not in pair.ours.list_namespaces()
    assert ("ab",) in pair.reference.list_namespaces()


# --- search without a query --------------------------------------------------------------


FILTERS: list[dict[str, Any]] = [
    {"tag": "x"},
    {"tag": {"$eq": "y"}},
    {"tag": {"$ne": "x"}},
    {"n": 3},
    {"n": 3.0},
    {"n": {"$gt": 2}},
    {"n": {"$gte": 2, "$lt": 5}},
    {"n": {"$lte": 4.5}},
    {"n": {"$gt": 1}, "tag": "y"},
    {"tag": "nope"},
    {"meta": {"lang": "en"}},
    {"meta": {"lang": "en", "level": 2}},
    {"words": ["lemon", "cake"]},
    {"missing": None},
    {"flag": True},
    {"flag": False},
    {"flag": {"$ne": True}},
    {"meta": {"$eq": {"lang": "fr", "level": 1}}},
]


def test_search_filters(pair: Pair) -> None:
    extra = [
        (("a",), "m1", {"n": 7, "tag": "x", "meta": {"lang": "en", "level": 2}}),
        (("a",), "m2", {"n": 8, "tag": "y", "meta": {"lang": "fr", "level": 1}}),
        (("a", "b"), "m3", {"n": 9, "tag": "x", "words": ["lemon", "cake"], "flag": True}),
        (("a", "b"), "m4", {"n": 10, "tag": "y", "words": ["lemon"], "flag": False}),
    ]

    def put_all(s: BaseStore) -> None:
        # Namespace by namespace (InMemoryStore lists namespace by namespace, this
        # store oldest first), in one batch.
        ops = [PutOp(ns, k, v) for ns, k, v in FILL + extra]
        s.batch(sorted(ops, key=lambda op: op.namespace))

    pair.both(put_all)
    for f in FILTERS:
        found = pair.same(lambda s, f=f: s.search(("a",), filter=f, limit=100))
        pair.same(lambda s, f=f: s.search((), filter=f, limit=100))
        pair.same(lambda s, f=f: s.search(("a",), filter=f, limit=2, offset=1))
        assert all(item.score is None for item in found)


def test_search_pages_in_insertion_order(pair: Pair) -> None:
    def put_all(s: BaseStore) -> None:
        s.batch(
            [PutOp(("docs",), f"d{i}", {"text": f"document number {i}", "i": i}) for i in range(8)]
        )
        s.put(("docs",), "d2", {"text": "document two, updated", "i": 2})  # keeps its place
        s.delete(("docs",), "d5")
        s.put(("docs",), "d5", {"text": "document five, again", "i": 5})  # now the newest

    pair.both(put_all)
    for limit, offset in [(10, 0), (2, 0), (2, 2), (3, 4), (1, 7), (1, 9), (0, 0)]:
        pair.same(lambda s, li=limit, o=offset: s.search(("docs",), limit=li, offset=o))
        pair.same(
            lambda s, li=limit, o=offset: s.search(
                ("docs",), filter={"i": {"$gte": 2}}, limit=li, offset=o
            )
        )


def test_order_operators_compare_numbers_and_skip_items_without_the_field(pair: Pair) -> None:
    pair.both(lambda s: s.put(("a",), "num", {"n": 5}))
    pair.both(lambda s: s.put(("a",), "text", {"n": "five"}))
    pair.both(lambda s: s.put(("a",), "none", {"other": 1}))
    # InMemoryStore raises here (float(None)); this store, like Postgres' JSON
    # comparison, answers with the items whose field is a number that passes.
    with pytest.raises((TypeError, ValueError)):
        pair.reference.search(("a",), filter={"n": {"$gt": 1}})
    assert [i.key for i in pair.ours.search(("a",), filter={"n": {"$gt": 1}})] == ["num"]


# --- search with a query -----------------------------------------------------------------


def test_query_search_returns_the_same_items_ranked_with_scores(pair: Pair) -> None:
    pair.both(fill)
    ref, ours = pair.both(lambda s: s.search(("a",), query="a cat on a mat", limit=100))
    assert sorted(visible(ours)) == sorted(visible(ref))
    assert all(isinstance(h.score, float) for h in ours)
    assert [h.score for h in ours] == sorted((h.score for h in ours), reverse=True)
    assert ours[0].key == "k1" and ours[0].namespace == ("a",)
    # Pages of the ranking are disjoint and add up to it.
    pages = [pair.ours.search(("a",), query="a cat on a mat", limit=2, offset=o) for o in (0, 2)]
    assert visible(pages[0] + pages[1]) == visible(ours)
    # With a filter, every leg searches only the items passing it.
    ref, ours = pair.both(lambda s: s.search(("a",), query="cat", filter={"tag": "y"}, limit=100))
    assert sorted(visible(ours)) == sorted(visible(ref))
    assert ours[0].key == "k3"


def test_query_search_with_a_nested_filter_loses_nothing_to_the_cut(pair: Pair) -> None:
    def put_all(s: BaseStore) -> None:
        s.batch(
            [
                PutOp(
                    ("n",),
                    f"k{i}",
                    {"text": f"the cat number {i} sat on the mat", "meta": {"owner": owner}},
                )
                for i in range(30)
                for owner in ["me" if i % 10 == 0 else "other"]
            ]
        )

    pair.both(put_all)
    ref, ours = pair.both(
        lambda s: s.search(("n",), query="cat on the mat", filter={"meta": {"owner": "me"}})
    )
    assert sorted(visible(ours)) == sorted(visible(ref))
    assert {h.key for h in ours} == {"k0", "k10", "k20"}


def test_index_fields_choose_what_is_searchable(embedder: Any, tmp_path: Path) -> None:
    with HybridMemoryStore(path=tmp_path, embedding=embedder, index={"fields": ["title"]}) as store:
        store.put(("d",), "1", {"title": "volcano eruptions", "body": "lemon cake recipe"})
        store.put(("d",), "2", {"title": "lemon cake", "body": "volcano eruptions"})
        store.put(("d",), "3", {"body": "volcano eruptions"})  # no title: not searchable
        store.put(("d",), "4", {"title": "x", "notes": [{"t": "volcano"}]}, index=["notes[*].t"])
        hits = store.search(("d",), query="volcano eruptions", limit=10)
        assert [h.key for h in hits[:2]] in (["1", "4"], ["4", "1"])
        assert hits[-1].key == "3" and hits[-1].score is None
        assert hits[2].key == "2"


# --- index=False ---------------------------------------------------------------------------


def test_index_false_is_stored_listed_but_not_searchable_by_text(pair: Pair) -> None:
    def put_all(s: BaseStore) -> None:
        s.put(("m",), "plain", {"text": "the weather is sunny today"})
        s.put(("m",), "hidden", {"text": "secret launch codes"}, index=False)
        s.put(("m",), "other", {"text": "bananas are yellow"})

    pair.both(put_all)
    assert pair.same(lambda s: s.get(("m",), "hidden")).value == {"text": "secret launch codes"}
    pair.same(lambda s: s.search(("m",), limit=10))
    pair.same(lambda s: s.list_namespaces())
    # A query matching its text word for word still ranks it last, unscored (as
    # InMemoryStore fills a page with its unembedded items).
    ref, ours = pair.both(lambda s: s.search(("m",), query="secret launch codes", limit=10))
    assert (
        visible(ours[-1]) == visible(ref[-1]) == (("m",), "hidden", {"text": "secret launch codes"})
    )
    assert ours[-1].score is None and all(h.score is not None for h in ours[:-1])
    assert "hidden" not in [h.key for h in pair.ours.search(("m",), query="secret codes", limit=2)]
    # Indexed again by a later put.
    pair.ours.put(("m",), "hidden", {"text": "secret launch codes"})
    assert pair.ours.search(("m",), query="secret launch codes", limit=1)[0].key == "hidden"


# --- batches -------------------------------------------------------------------------------


def test_batch_of_mixed_ops_reads_before_writes(pair: Pair) -> None:
    pair.both(fill)
    ops = [
        PutOp(("a",), "new", {"text": "fresh item", "n": 0}),
        GetOp(("a",), "new"),
        GetOp(("a",), "k1"),
        SearchOp(("a", "b"), filter={"tag": "x"}),
        ListNamespacesOp(max_depth=1),
        PutOp(("a",), "k1", None),
        PutOp(("a",), "new", {"text": "fresh item, second put wins", "n": 1}),
        GetOp(("ab",), "k1"),
    ]
    pair.same(lambda s: s.batch(ops))
    pair.same(lambda s: s.get(("a",), "new"))
    pair.same(lambda s: s.get(("a",), "k1"))
    ref, ours = pair.both(lambda s: s.search(("a",), limit=100))
    assert sorted(visible(ours)) == sorted(visible(ref))  # namespaces interleave differently


def test_bad_input_raises_clearly_and_changes_nothing(pair: Pair) -> None:
    pair.both(fill)
    store = pair.ours
    before = store.search((), limit=100)
    for namespace in [("a.b",), ("",), ()]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"text": "x"})
        with pytest.raises(InvalidNamespaceError):
            pair.reference.put(namespace, "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph",), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError, match="period"):
        store.batch([PutOp(("ok",), "k", {"a": 1}), GetOp(("x.y",), "k")])
    with pytest.raises(ValueError, match=r"ops\[1\].value: must be JSON|value"):
        store.batch([PutOp(("ok",), "k", {"a": 1}), PutOp(("ok",), "j", {"a": object()})])
    with pytest.raises(ValueError, match=r"filter\['n'\]: unknown operator '\$like'"):
        store.batch([PutOp(("ok",), "k", {"a": 1}), SearchOp(("a",), filter={"n": {"$like": 1}})])
    with pytest.raises(ValueError, match=r"\$gt: compares numbers only"):
        store.search(("a",), filter={"n": {"$gt": "3"}})
    with pytest.raises(ValueError, match=r"ops\[0\].limit: expected an integer >= 0"):
        store.search(("a",), limit=-1)
    with pytest.raises(ValueError, match=r"ops\[0\].ttl: expected None or a positive"):
        store.put(("ok",), "k", {"a": 1}, ttl=-5)
    with pytest.raises(ValueError, match=r"ops\[0\].index: expected a list"):
        store.put(("ok",), "k", {"a": 1}, index="text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown operation"):
        store.batch(["not an op"])  # type: ignore[list-item]
    assert store.search((), limit=100) == before
    assert store.get(("ok",), "k") is None
    with pytest.raises(ValueError, match="memory: pass either memory"):
        HybridMemoryStore(memory=store.memory, path="elsewhere")
    with pytest.raises(ValueError, match=r"index\.embed: the store embeds with the HybridMemory"):
        HybridMemoryStore(memory=store.memory, index={"dims": 3, "embed": len})
    with pytest.raises(ValueError, match=r"index\.dims: expected a positive integer"):
        HybridMemoryStore(memory=store.memory, index={"dims": 0})
    with pytest.raises(ValueError, match=r"index\.distance_type: only 'cosine'"):
        HybridMemoryStore(memory=store.memory, index={"distance_type": "l2"})
    with pytest.raises(ValueError, match=r"\$lt: compares numbers only \(not NaN\)"):
        store.search(("a",), filter={"n": {"$lt": float("nan")}})
    with pytest.raises(ValueError, match=r"index.fields: expected a list"):
        HybridMemoryStore(memory=store.memory, index={"fields": "text"})  # type: ignore[typeddict-item]
    # A store over a memory it was given leaves that memory open when closed.
    HybridMemoryStore(memory=store.memory).close()
    assert store.get(("a",), "k1") is not None


# --- async ---------------------------------------------------------------------------------


async def test_async_variants_match_the_reference(pair: Pair) -> None:
    async def scenario(s: BaseStore) -> list[Any]:
        await s.aput(("u", "1"), "a", {"text": "likes green tea", "n": 1})
        await s.aput(("u", "1"), "b", {"text": "works as a nurse", "n": 2})
        await s.aput(("u", "2"), "a", {"text": "plays the cello", "n": 3})
        out: list[Any] = [await s.aget(("u", "1"), "a")]
        out.append(await s.asearch(("u",), filter={"n": {"$gte": 2}}))
        out.append(await s.alist_namespaces(prefix=("u",)))
        await s.adelete(("u", "1"), "a")
        out.append(await s.aget(("u", "1"), "a"))
        out.append(await s.abatch([GetOp(("u", "2"), "a"), SearchOp(("u", "1"))]))
        return out

    ref = await scenario(pair.reference)
    ours = await scenario(pair.ours)
    assert visible(ours) == visible(ref)
    hits = await pair.ours.asearch(("u",), query="which instrument do they play?")
    assert hits[0].key == "a" and hits[0].namespace == ("u", "2")


async def test_abatch_does_not_block_the_event_loop(pair: Pair) -> None:
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = ticks
    texts = [f"memory number {i} about topic {i % 7}" for i in range(40)]
    await pair.ours.abatch([PutOp(("bulk",), f"k{i}", {"text": t}) for i, t in enumerate(texts)])
    during = ticks - start
    stop.set()
    await task
    assert during > 1  # the loop kept running while the batch embedded and wrote
    assert len(await pair.ours.asearch(("bulk",), limit=100)) == 40


# --- TTL -----------------------------------------------------------------------------------


def expiry(store: HybridMemoryStore, namespace: tuple[str, ...], key: str) -> float:
    from langgraph.store.hybrid_memory.store import EXPIRES, item_id

    return float(store.memory.get(item_id(namespace, key)).metadata[EXPIRES])


def test_ttl_expires_refreshes_on_read_and_sweeps(embedder: Any, tmp_path: Path) -> None:
    with HybridMemoryStore(path=tmp_path, embedding=embedder) as store:
        assert store.supports_ttl
        store.put(("t",), "keep", {"text": "no ttl"})
        store.put(("t",), "long", {"text": "ten minutes"}, ttl=10)
        store.put(("t", "x"), "short", {"text": "gone soon"}, ttl=0.002)  # 120 ms
        first = expiry(store, ("t",), "long")
        updated = store.get(("t",), "long").updated_at  # type: ignore[union-attr]
        time.sleep(0.3)
        assert store.get(("t", "x"), "short") is None
        assert [i.key for i in store.search(("t",))] == ["keep", "long"]
        assert store.list_namespaces() == [("t",)]
        assert store.search(("t",), query="gone soon")[-1].key != "short"
        # A read pushes the expiry back, unless asked not to; updated_at stays.
        assert expiry(store, ("t",), "long") > first  # the reads above refreshed it
        first = expiry(store, ("t",), "long")
        store.get(("t",), "long", refresh_ttl=False)
        store.search(("t",), refresh_ttl=False)
        assert expiry(store, ("t",), "long") == first
        item = store.get(("t",), "long")
        refreshed = expiry(store, ("t",), "long")
        assert refreshed > first
        assert item is not None and item.updated_at == updated
        store.search(("t",), query="ten minutes")
        assert expiry(store, ("t",), "long") > refreshed
        assert store.memory.count() == 3  # the expired item is hidden until swept
        assert store.sweep_ttl() == 1
        assert store.memory.count() == 2


def test_default_ttl_from_the_config(embedder: Any, tmp_path: Path) -> None:
    with HybridMemoryStore(
        path=tmp_path, embedding=embedder, ttl={"default_ttl": 0.002, "refresh_on_read": False}
    ) as store:
        store.put(("t",), "a", {"text": "short lived"})
        store.put(("t",), "b", {"text": "kept"}, ttl=None)
        time.sleep(0.3)
        assert [i.key for i in store.search(("t",))] == ["b"]
    with pytest.raises(ValueError, match=r"ttl\.default_ttl"):
        HybridMemoryStore(path=tmp_path, embedding=embedder, ttl={"default_ttl": 0})


# --- LangGraph's conventions: index_config, infinite bounds, "langgraph" ops, scores -----------


def test_index_config_embeds_with_langgraph_s_embed(embedder: Any, tmp_path: Path) -> None:
    calls: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [list(v) for v in embedder.embed_documents(texts)]

    config = {"dims": 384, "embed": embed, "fields": ["text"]}
    with HybridMemoryStore(path=tmp_path, index=config) as store:  # type: ignore[arg-type]
        assert store.index_config is not None and store.index_config["dims"] == 384
        assert store.index_config["fields"] == ["text"]
        store.put(("docs",), "a", {"text": "the cat sleeps on the mat", "other": "zebra"})
        assert calls, "the store embedded with index['embed']"
        top = store.search(("docs",), query="the cat sleeps on the mat")[0]
        assert top.key == "a" and top.score is not None and top.score > 0.9
    with HybridMemoryStore(memory=HybridMemory(embedding=embed)) as plain:
        assert plain.index_config is None  # as InMemoryStore without an index


def test_infinite_bounds_compare_as_in_langgraph(pair: Pair) -> None:
    pair.both(fill)
    for condition in [
        {"$lt": float("inf")},
        {"$gt": float("-inf")},
        {"$lte": float("-inf")},
        {"$gte": float("inf")},
    ]:
        found = pair.same(lambda s, c=condition: s.search(("a",), filter={"n": c}, limit=100))
        expected = 4 if condition in ({"$lt": float("inf")}, {"$gt": float("-inf")}) else 0
        assert len(found) == expected


def test_a_langgraph_rooted_put_op_is_stored_as_in_memory_store(pair: Pair) -> None:
    op = PutOp(("langgraph", "internal"), "k", {"text": "kept by LangGraph itself"})
    pair.both(lambda s: s.batch([op]))
    pair.same(lambda s: s.get(("langgraph", "internal"), "k"))
    for store in (pair.ours, pair.reference):  # the public put() still refuses it
        with pytest.raises(InvalidNamespaceError, match="langgraph"):
            store.put(("langgraph",), "k", {"text": "x"})


def test_near_exact_search_scores_like_in_memory_store(pair: Pair) -> None:
    pair.both(fill)
    ref, ours = pair.both(lambda s: s.search(("a",), query="stock prices fell sharply", limit=3))
    assert ours[0].key == ref[0].key == "k2"
    assert ours[0].score is not None and ours[0].score >= 0.9
    # Every score in [0, 1], non-increasing; an unrelated item scores low.
    scores = [h.score for h in ours]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    unrelated = pair.ours.search(("c",), query="stock prices fell sharply")
    assert [h.key for h in unrelated] == ["k9"] and (unrelated[0].score or 0) < 0.3


# --- namespaces that cannot collide ----------------------------------------------------------

HOSTILE = [
    ("a:b",),
    ("a", "b"),
    ("a", "b:"),
    ("a:", "b"),
    ('a","b',),
    ("a", '","b'),
    ("a\\", "b"),
    ("a/b",),
    ("a", "b", "c"),
    ("a b",),
    ("A", "b"),
    ("a", "b\n"),
    ("ä", "b"),
    ("lg-", "b"),
    ("[", "]"),
]


def test_hostile_namespaces_never_share_an_item(embedder: Any, tmp_path: Path) -> None:
    with HybridMemoryStore(path=tmp_path, embedding=embedder) as store:
        store.batch(
            [PutOp(ns, "k", {"text": f"item of {ns!r}", "ns": list(ns)}) for ns in HOSTILE]
            + [PutOp(ns, "k:x", {"text": "other key"}) for ns in HOSTILE]
        )
        assert len(store.search((), limit=1000)) == 2 * len(HOSTILE)
        for ns in HOSTILE:
            item = store.get(ns, "k")
            assert item is not None and item.namespace == ns and item.value["ns"] == list(ns)
        # A key that looks like a namespace separator addresses nothing elsewhere.
        assert store.get(("a",), "b:k") is None and store.get(("a",), "b") is None
        # Deleting in one namespace leaves every other one's item.
        store.delete(("a:b",), "k")
        assert store.get(("a:b",), "k") is None
        assert all(store.get(ns, "k") is not None for ns in HOSTILE if ns != ("a:b",))
        # Prefix search is label by label: ("a",) holds ("a", "b") and ("a", "b:")...
        under_a = {item.namespace for item in store.search(("a",), limit=1000)}
        assert under_a == {ns for ns in HOSTILE if ns[0] == "a"}
        # ... and a query search in one namespace never returns another's item.
        hits = store.search(("a", "b"), query="item of", limit=100)
        assert {h.namespace for h in hits} == {("a", "b"), ("a", "b", "c")}


@pytest.mark.parametrize(
    ("left", "right"),
    [(("a:b",), ("a", "b")), (("a", "b"), ("a,b",)), (("a", ""), ("a",)), (("x",), ("x", ""))],
)
def test_item_ids_are_injective(left: tuple[str, ...], right: tuple[str, ...]) -> None:
    from langgraph.store.hybrid_memory.store import item_id

    assert item_id(left, "k") != item_id(right, "k")
    assert item_id(left, "k:x") != item_id((*left, "k"), "x")


# --- the async store: LangGraph's async API, bursts written as one batch -----------------------


async def test_async_store_batches_a_burst_into_one_write(embedder: Any, tmp_path: Path) -> None:
    from langgraph.store.hybrid_memory import AsyncHybridMemoryStore

    sizes: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        sizes.append(len(texts))
        return [list(v) for v in embedder.embed_documents(texts)]

    async with AsyncHybridMemoryStore(path=tmp_path, embedding=embed) as store:
        await asyncio.gather(
            *(store.aput(("burst",), f"k{i}", {"text": f"fact number {i}"}) for i in range(200))
        )
        # One model warm-up, then the 200 puts embedded in full batches: one add_many
        # (one call per put, the store without batching, would be 200 calls of one text).
        batch = store.memory.settings.embedding_batch_size
        assert sizes[0] == 1 and sum(sizes[1:]) == 200
        assert len(sizes[1:]) == -(-200 // batch)
        found = await store.asearch(("burst",), limit=300)
        assert len(found) == 200
        got = await asyncio.gather(*(store.aget(("burst",), f"k{i}") for i in range(200)))
        assert [g.value["text"] for g in got if g] == [f"fact number {i}" for i in range(200)]
        # LangGraph's rule for its async stores: no sync calls in the event loop's thread.
        with pytest.raises(asyncio.InvalidStateError):
            store.get(("burst",), "k0")
        # ... but from another thread they work.
        item = await asyncio.to_thread(store.get, ("burst",), "k1")
        assert item is not None and item.value["text"] == "fact number 1"


async def test_async_store_ttl_methods_are_coroutines(embedder: Any, tmp_path: Path) -> None:
    from langgraph.store.hybrid_memory import AsyncHybridMemoryStore

    ttl = {"default_ttl": 0.5 / 60, "sweep_interval_minutes": 0.2 / 60}
    async with AsyncHybridMemoryStore(path=tmp_path, embedding=embedder, ttl=ttl) as store:
        await store.aput(("t",), "gone", {"text": "short lived"})
        await store.aput(("t",), "kept", {"text": "long lived"}, ttl=None)
        assert await store.sweep_ttl() == 0
        task = await store.start_ttl_sweeper()
        assert isinstance(task, asyncio.Task)
        assert await store.start_ttl_sweeper() is task  # one sweeper at a time
        for _ in range(60):
            await asyncio.sleep(0.25)
            if store.memory.count() == 1:
                break
        assert store.memory.count() == 1  # the sweeper deleted the expired item
        assert await store.aget(("t",), "kept") is not None
        assert await store.stop_ttl_sweeper() is True
        assert task.done()
        assert await store.stop_ttl_sweeper() is True
