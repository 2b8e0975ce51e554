"""Tenant isolation through the engine and ``HybridRetriever`` (issue 16, item 5).

Two ways to keep agents (tenants) apart in one memory:

(a) metadata scope: every memory carries ``metadata={"tenant": t}`` and every read or
    filter delete is given ``filter={"tenant": t, ...}`` (ANDed with anything else);
(b) one collection per tenant, on the same path or the same Chroma server.

Randomized, seeded worlds: tenants write in one shared vocabulary with shared tags (tag
words occur in the texts, so the tag leg fires), and tenant values chosen to trip an
escaping or typing slip (``"t%"``, ``"t_"``, ``"O'Brien"``, ``"acme"`` beside
``"acme2"``, the string ``"1"`` beside the number ``1``). Queries are random words
(tag words included), filters combine the tenant with random conditions ($and, $or,
$in, $nin, $ne, order operators, tags, a field some memories lack). Invariants: no hit
from another tenant and every hit passes the whole filter (search, related, the
LangChain ``invoke`` and the LlamaIndex ``retrieve``); ``count`` and ``list_memories``
are exactly the model's; ``delete(filter=...)`` removes exactly the matching memories
of that tenant and nothing of anyone else's. ``HYBRID_MEMORY_ISOLATION_ROUNDS`` raises
the number of rounds (long form).
"""

from __future__ import annotations

import os
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, HybridRetriever, MemoryNotFoundError

from ..conftest import HashEmbedding

ROUNDS = int(os.environ.get("HYBRID_MEMORY_ISOLATION_ROUNDS", "150"))
# Memories of the one big tenant; above 20,000 its filter takes the broad path (the long
# form: HYBRID_MEMORY_ISOLATION_BIG=20050, some 30 s more on two cores).
BIG = int(os.environ.get("HYBRID_MEMORY_ISOLATION_BIG", "3000"))
_WORDS = """
coffee travel garden budget music health river stone morning night deploy key server backup
invoice ticket paris hotel flight doctor recipe basil tomato guitar lesson photo album camera
laptop screen printer meeting friday urgent
"""
WORDS = tuple(_WORDS.split())
TAG_WORDS = ("coffee", "travel", "garden", "budget", "music", "health", "deploy", "urgent")
TOPICS = ("work", "home", "trip", "food", "ops")
TENANTS: tuple[Any, ...] = ("acme", "acme2", "t%", "t_", "O'Brien", "1", 1)
YEAR = 365 * 86400.0
NOW = 1_790_000_000.0


@dataclass
class Rec:
    tenant: Any
    text: str
    tags: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


def same(a: Any, b: Any) -> bool:
    """Chroma's equality: numbers never equal strings or booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def passes(where: dict[str, Any], rec: Rec) -> bool:
    """The model's filter semantics, written independently of the library's."""
    for key, value in where.items():
        if key == "$and":
            if not all(passes(w, rec) for w in value):
                return False
        elif key == "$or":
            if not any(passes(w, rec) for w in value):
                return False
        else:
            ops = value if isinstance(value, dict) else {"$eq": value}
            for op, operand in ops.items():
                if not _test(key, op, operand, rec):
                    return False
    return True


def _test(key: str, op: str, operand: Any, rec: Rec) -> bool:
    if key == "tags":
        held = operand in rec.tags
        return held if op == "$contains" else not held
    present = key in rec.metadata
    value = rec.metadata.get(key)
    if op == "$eq":
        return present and same(value, operand)
    if op == "$ne":
        return not present or not same(value, operand)
    if op == "$in":
        return present and any(same(value, o) for o in operand)
    if op == "$nin":
        return not present or not any(same(value, o) for o in operand)
    if not present or isinstance(value, (bool, str)):
        return False
    return {
        "$gt": value > operand,
        "$gte": value >= operand,
        "$lt": value < operand,
        "$lte": value <= operand,
    }[op]


class World:
    """A seeded model of what each tenant stored, kept in step with the store."""

    def __init__(self, rng: random.Random, memory: HybridMemory) -> None:
        self.rng = rng
        self.memory = memory
        self.recs: dict[str, Rec] = {}
        self._texts: set[str] = set()

    def new_item(self, tenant: Any) -> dict[str, Any]:
        rng = self.rng
        while True:  # exact duplicates (same text and metadata) are one memory
            text = " ".join(rng.choices(WORDS, k=rng.randint(3, 8)))
            if text not in self._texts:
                self._texts.add(text)
                break
        metadata: dict[str, Any] = {
            "tenant": tenant,
            "topic": rng.choice(TOPICS),
            "priority": rng.randint(0, 5),
        }
        if rng.random() < 0.5:
            metadata["flag"] = rng.random() < 0.5
        return {
            "text": text,
            "tags": rng.sample(TAG_WORDS, rng.randint(0, 3)),
            "metadata": metadata,
            "created_at": NOW - rng.random() * YEAR,
        }

    def add(self, tenant: Any, n: int) -> None:
        items = [self.new_item(tenant) for _ in range(n)]
        ids = self.memory.add_many(items)
        for memory_id, item in zip(ids, items, strict=True):
            self.recs[memory_id] = Rec(
                tenant, item["text"], tuple(item["tags"]), item["metadata"], item["created_at"]
            )

    def of(self, where: dict[str, Any]) -> set[str]:
        return {i for i, rec in self.recs.items() if passes(where, rec)}

    def query(self) -> str:
        words = self.rng.choices(WORDS, k=self.rng.randint(1, 4))
        if self.rng.random() < 0.5:
            words.append(self.rng.choice(TAG_WORDS))
        return " ".join(words)


def tenant_condition(rng: random.Random, tenant: Any) -> dict[str, Any]:
    return rng.choice(
        [{"tenant": tenant}, {"tenant": {"$eq": tenant}}, {"tenant": {"$in": [tenant]}}]
    )


def random_condition(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    kind = rng.randrange(7 if depth < 2 else 5)
    if kind == 0:
        op = rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
        return {"priority": {op: rng.randint(0, 5)}}
    if kind == 1:
        op = rng.choice(["$in", "$nin"])
        return {"topic": {op: rng.sample(TOPICS, rng.randint(1, 3))}}
    if kind == 2:
        return rng.choice([{"topic": rng.choice(TOPICS)}, {"topic": {"$ne": rng.choice(TOPICS)}}])
    if kind == 3:
        op = rng.choice(["$contains", "$not_contains"])
        return {"tags": {op: rng.choice(TAG_WORDS)}}
    if kind == 4:
        return rng.choice([{"flag": True}, {"flag": {"$ne": True}}, {"flag": {"$eq": False}}])
    op = "$or" if kind == 5 else "$and"
    return {op: [random_condition(rng, depth + 1) for _ in range(rng.randint(2, 3))]}


def scoped_filter(rng: random.Random, tenant: Any) -> dict[str, Any]:
    """The tenant ANDed with a random condition, in the shapes a user might write it."""
    own = tenant_condition(rng, tenant)
    shape = rng.randrange(4)
    if shape == 0:
        return own
    other = random_condition(rng)
    if shape == 1:
        parts = [own, other]
        rng.shuffle(parts)
        return {"$and": parts}
    if shape == 2 and not set(other) & set(own):
        return {**other, **own}  # an implicit $and of the top-level keys
    return {"$and": [own, {"$or": [other, random_condition(rng)]}]}


def check_hits(hits: list[tuple[str, Any]], world: World, tenant: Any, where: dict[str, Any]):
    """Every hit is a memory of ``tenant`` that passes ``where`` (ids and metadata)."""
    for memory_id, metadata_tenant in hits:
        rec = world.recs.get(memory_id)
        assert rec is not None, f"a hit that is no stored memory: {memory_id}"
        assert same(rec.tenant, tenant), f"leak: {tenant!r} got {rec.tenant!r}'s {memory_id}"
        assert same(metadata_tenant, tenant), f"leak in metadata: {metadata_tenant!r}"
        assert passes(where, rec), f"{memory_id} does not pass {where}"


def run_rounds(world: World, rounds: int, *, deletes: bool = True) -> Counter[str]:
    rng, memory = world.rng, world.memory
    tally: Counter[str] = Counter()
    retrievers: dict[Any, Any] = {}
    for _ in range(rounds):
        tenant = rng.choice(TENANTS)
        where = scoped_filter(rng, tenant)
        op = rng.random()
        if op < 0.35:
            result = memory.search(
                world.query(),
                k=rng.randint(1, 60),
                filter=where,
                alpha=rng.choice([None, 0.0, 0.4, 1.0]),
                tags=rng.sample(TAG_WORDS, rng.randint(0, 2)),
            )
            check_hits([(h.id, h.metadata.get("tenant")) for h in result], world, tenant, where)
            tally["search"] += 1
            tally["hits"] += len(result)
        elif op < 0.5:
            anyone = rng.choice(sorted(world.recs))  # often another tenant's memory
            result = memory.related(anyone, k=rng.randint(1, 30), filter=where)
            ids = [(h.id, h.metadata.get("tenant")) for h in result]
            assert anyone not in [i for i, _ in ids]
            check_hits(ids, world, tenant, where)
            tally["related"] += 1
            tally["hits"] += len(result)
        elif op < 0.65:
            assert memory.count(where) == len(world.of(where)), where
            tally["count"] += 1
        elif op < 0.75:
            expected = world.of(where)
            listed = memory.list_memories(where)
            assert {m.id for m in listed} == expected, where
            limit, offset = rng.randint(1, 20), rng.randint(0, 20)
            page = memory.list_memories(where, limit=limit, offset=offset)
            assert [m.id for m in page] == [m.id for m in listed][offset : offset + limit]
            tally["list"] += 1
        elif op < 0.9:
            # a retriever bound to the tenant; half the time the call narrows it further
            # with a filter that carries the tenant too (a per-call filter replaces the
            # retriever's: it must carry the tenant itself)
            retriever = retrievers.get(tenant)
            if retriever is None:
                scope = {"tenant": tenant}
                retriever = retrievers[tenant] = HybridRetriever(memory=memory, filter=scope)
            query, k = world.query(), rng.randint(1, 30)
            if rng.random() < 0.5:
                docs = retriever.invoke(query, k=k, filter=where)
                check_hits([(d.id, d.metadata["tenant"]) for d in docs], world, tenant, where)
            else:
                scope = {"tenant": tenant}
                docs = retriever.invoke(query, k=k)
                check_hits([(d.id, d.metadata["tenant"]) for d in docs], world, tenant, scope)
            nodes = retriever.retrieve(query)
            pairs = [(n.node.node_id, n.node.metadata["tenant"]) for n in nodes]
            check_hits(pairs, world, tenant, {"tenant": tenant})
            tally["retriever"] += 1
            tally["hits"] += len(docs) + len(nodes)
        elif deletes:
            before = {t: len(world.of({"tenant": t})) for t in TENANTS}
            doomed = world.of(where)
            assert memory.delete(filter=where) == len(doomed), where
            for memory_id in doomed:
                del world.recs[memory_id]
            for t in TENANTS:
                expected = before[t] - (len(doomed) if same(t, tenant) else 0)
                assert memory.count({"tenant": t}) == expected, (t, where)
            for memory_id in rng.sample(sorted(doomed), min(3, len(doomed))):
                with pytest.raises(MemoryNotFoundError):
                    memory.get(memory_id)
            world.add(tenant, len(doomed) + rng.randint(1, 5))  # keep the tenant populated
            tally["delete"] += 1
            tally["deleted"] += len(doomed)
    return tally


def store(**kwargs: Any) -> HybridMemory:
    return HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **kwargs)


# --- (a) metadata scope -------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_metadata_scope_never_leaks(seed: int) -> None:
    rng = random.Random(seed)
    with store() as memory:
        world = World(rng, memory)
        for tenant in TENANTS:
            world.add(tenant, rng.randint(20, 60))
        tally = run_rounds(world, ROUNDS)
        for tenant in TENANTS:
            assert memory.count({"tenant": tenant}) == len(world.of({"tenant": tenant}))
        assert memory.count() == len(world.recs)
    # the rounds did real work: searches with hits, deletes that removed something
    assert tally["search"] and tally["related"] and tally["retriever"] and tally["hits"] > 100
    assert tally["delete"] and tally["deleted"]


def test_metadata_scope_holds_beside_a_tenant_with_many_memories() -> None:
    """One tenant with ``BIG`` memories beside small ones. With more than 20,000, a
    filter passing them all is too broad to resolve to ids first, so the legs apply it
    as a condition instead (the other tenants' stay narrow): neither path leaks."""
    rng = random.Random(7)
    with store() as memory:
        world = World(rng, memory)
        big = [world.new_item("acme") for _ in range(BIG)]
        for memory_id, item in zip(memory.add_many(big), big, strict=True):
            world.recs[memory_id] = Rec(
                "acme", item["text"], tuple(item["tags"]), item["metadata"], item["created_at"]
            )
        for tenant in TENANTS[1:]:
            world.add(tenant, rng.randint(10, 30))
        for _ in range(40):
            tenant = "acme" if rng.random() < 0.5 else rng.choice(TENANTS[1:])
            where = scoped_filter(rng, tenant)
            if tenant == "acme" and rng.random() < 0.5:
                where = tenant_condition(rng, tenant)  # all of them: the broad path at BIG
            result = memory.search(world.query(), k=rng.randint(10, 100), filter=where)
            check_hits([(h.id, h.metadata.get("tenant")) for h in result], world, tenant, where)
            result = memory.related(rng.choice(sorted(world.recs)), k=50, filter=where)
            check_hits([(h.id, h.metadata.get("tenant")) for h in result], world, tenant, where)
        for tenant in TENANTS:
            assert memory.count({"tenant": tenant}) == len(world.of({"tenant": tenant}))
        doomed = world.of({"$and": [{"tenant": "acme"}, {"priority": 0}]})
        assert memory.delete(filter={"tenant": "acme", "priority": 0}) == len(doomed) > BIG // 10
        assert memory.count({"tenant": "acme"}) == BIG - len(doomed)
        for tenant in TENANTS[1:]:
            assert memory.count({"tenant": tenant}) == len(world.of({"tenant": tenant}))


def test_the_same_text_from_two_tenants_is_two_memories() -> None:
    with store() as memory:
        mine = memory.add("I take my coffee black", metadata={"tenant": "acme"})
        theirs = memory.add("I take my coffee black", metadata={"tenant": "globex"})
        assert theirs != mine
        assert memory.count({"tenant": "globex"}) == 1
        assert memory.get(theirs).metadata["tenant"] == "globex"
        assert memory.get(mine).metadata["tenant"] == "acme"
        # within one scope, an exact duplicate is still one memory
        assert memory.add("I take my coffee black", metadata={"tenant": "globex"}) == theirs
        assert memory.count() == 2


def test_the_same_text_from_two_tenants_with_allow_duplicates_or_own_ids() -> None:
    with store() as memory:
        a = memory.add("I take my coffee black", metadata={"tenant": "acme"})
        b = memory.add(
            "I take my coffee black", metadata={"tenant": "globex"}, allow_duplicates=True
        )
        c = memory.add("I take my coffee black", id="initech:1", metadata={"tenant": "initech"})
        assert len({a, b, c}) == 3
        for tenant, own in (("acme", a), ("globex", b), ("initech", c)):
            assert memory.count({"tenant": tenant}) == 1
            hits = memory.search("coffee black", filter={"tenant": tenant})
            assert [h.id for h in hits] == [own]
        assert memory.delete(filter={"tenant": "globex"}) == 1
        assert memory.count() == 2 and memory.get(a).metadata["tenant"] == "acme"


# --- (b) a collection per tenant ------------------------------------------------------------


def collections_world(open_store: Callable[[str], HybridMemory], seed: int, rounds: int) -> None:
    """Tenants each in their own collection of one path or server: nothing crosses."""
    rng = random.Random(seed)
    names = [f"tenant-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    stores = {name: open_store(name) for name in names}
    try:
        worlds = {name: World(rng, stores[name]) for name in names}
        for name in names:
            # same tenant value and overlapping texts in every collection: only the
            # collection separates them
            worlds[name].add("shared", rng.randint(20, 40))
        explicit = {
            name: stores[name].add("the same id everywhere", id="same-id") for name in names
        }
        assert set(explicit.values()) == {"same-id"}
        for name in names:
            worlds[name].recs["same-id"] = Rec("shared", "the same id everywhere", ())
        for _ in range(rounds):
            name = rng.choice(names)
            memory, world = stores[name], worlds[name]
            condition = random_condition(rng)
            op = rng.random()
            if op < 0.4:
                result = memory.search(world.query(), k=rng.randint(1, 60), filter=condition)
                assert {h.id for h in result} <= world.of(condition)
            elif op < 0.55:
                result = memory.related(rng.choice(sorted(world.recs)), k=30)
                assert {h.id for h in result} <= set(world.recs)
            elif op < 0.7:
                retriever = HybridRetriever(memory=memory, k=rng.randint(1, 30))
                query = world.query()
                assert {d.id for d in retriever.invoke(query)} <= set(world.recs)
                assert {n.node.node_id for n in retriever.retrieve(query)} <= set(world.recs)
            elif op < 0.85:
                assert memory.count(condition) == len(world.of(condition))
                assert {m.id for m in memory.list_memories(condition)} == world.of(condition)
            else:
                doomed = world.of(condition)
                before = {n: stores[n].count() for n in names}
                assert memory.delete(filter=condition) == len(doomed)
                for memory_id in doomed:
                    del world.recs[memory_id]
                for n in names:
                    assert stores[n].count() == before[n] - (len(doomed) if n == name else 0)
                world.add("shared", rng.randint(1, 8))
        for name in names:
            assert stores[name].count() == len(worlds[name].recs)
            others = [i for n in names if n != name for i in worlds[n].recs if i != "same-id"]
            for memory_id in rng.sample(others, min(5, len(others))):
                with pytest.raises(MemoryNotFoundError):
                    stores[name].get(memory_id)
            if "same-id" in worlds[name].recs:  # unless a filter delete took it
                assert stores[name].get("same-id").text == "the same id everywhere"
    finally:
        for memory in stores.values():
            memory.close()


def test_collections_on_one_path_never_leak(tmp_path: Path) -> None:
    collections_world(lambda name: store(path=tmp_path / "db", collection=name), 3, ROUNDS)


@pytest.mark.server
def test_collections_on_one_server_never_leak(chroma_server: str) -> None:
    collections_world(
        lambda name: store(url=chroma_server, collection=name, sync_interval=0), 4, ROUNDS // 2
    )
