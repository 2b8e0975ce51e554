"""One hit per group of near-duplicates, the others named on it
(hybrid_memory._search.collapse), over memories and vectors given as plain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st

from hybrid_memory._model.near_duplicates import NearDuplicateRule
from hybrid_memory._model.results import Memory
from hybrid_memory._search.collapse import Chosen, choose

RULE = NearDuplicateRule(cosine=0.94, words_cosine=0.6, extra_words=5)


class Store:
    """Memories and vectors by id, read as a search reads them."""

    def __init__(self) -> None:
        self.memories: dict[str, Memory] = {}
        self.vectors: dict[str, np.ndarray] = {}

    def put(self, memory_id: str, text: str, vector: Sequence[float], day: int) -> None:
        when = datetime(2026, 1, day, tzinfo=timezone.utc)
        self.memories[memory_id] = Memory(memory_id, text, created_at=when)
        self.vectors[memory_id] = np.asarray(vector, dtype=np.float64)

    def read(self, ids: Sequence[str], k: int) -> list[Memory]:
        return [self.memories[i] for i in ids if i in self.memories][:k]

    def read_vectors(self, ids: list[str]) -> Mapping[str, npt.ArrayLike]:
        return {i: self.vectors[i] for i in ids if i in self.vectors}


class Reader:
    """A store's memories and vectors, read as the searcher reads its candidates."""

    def __init__(self, store: Store) -> None:
        self.memories = store.read
        self.vectors = store.read_vectors


def peanuts() -> Store:
    store = Store()
    store.put("p1", "Alice is allergic to peanuts", [1.0, 0.0, 0.0], day=1)
    store.put("other", "Alice drinks oat milk", [0.0, 1.0, 0.0], day=2)
    store.put("p2", "Alice is allergic to peanuts (confirmed again)", [0.9, 0.1, 0.0], day=3)
    store.put("p3", "2026-01-05: Alice is allergic to peanuts", [0.8, 0.0, 0.3], day=5)
    store.put("bday", "Alice was born in May", [0.0, 0.0, 1.0], day=4)
    return store


ORDER = ["p1", "other", "p2", "p3", "bday"]
FUSED = {i: 1.0 / (60 + r) for r, i in enumerate(ORDER, start=1)}


def run(
    store: Store,
    k: int,
    *,
    rule: NearDuplicateRule | None = RULE,
    mmr: float = 0.0,
    superseded: Mapping[str, str] | None = None,
) -> Chosen:
    return choose(ORDER, FUSED, k, Reader(store), rule, mmr, superseded or {})


def test_near_duplicates_collapse_into_the_best_ranked_at_its_place() -> None:
    chosen = run(peanuts(), 3)
    assert [m.id for m in chosen.memories] == ["p1", "other", "bday"]  # not p3, the newest
    assert chosen.similar_ids("p1") == ("p2", "p3")  # fused order, itself left out
    assert chosen.similar_ids("other") == ()
    assert chosen.best(FUSED)["p1"] == FUSED["p1"]  # the group's place and score


def test_the_superseding_member_stands_for_its_group_even_when_older() -> None:
    chosen = run(peanuts(), 2, superseded={"p3": "p2", "p1": "p2"})
    assert chosen.memories[0].id == "p2"
    assert set(chosen.similar_ids("p2")) == {"p1", "p3"}


def test_without_a_rule_every_candidate_is_a_hit() -> None:
    chosen = run(peanuts(), 3, rule=None)
    assert [m.id for m in chosen.memories] == ["p1", "other", "p2"]
    assert chosen.groups == {}


def test_a_candidate_without_a_vector_stands_alone() -> None:
    store = peanuts()
    del store.vectors["p2"]
    chosen = run(store, 4)
    assert [m.id for m in chosen.memories] == ["p1", "other", "p2", "bday"]


def test_mmr_picks_variety_among_the_groups() -> None:
    store = peanuts()
    store.put("o2", "Alice drinks oat milk every day", [0.1, 0.99, 0.0], day=6)
    order = ["p1", "other", "o2", "p2", "bday"]
    fused = {i: 1.0 / (60 + r) for r, i in enumerate(order, start=1)}
    plain = choose(order, fused, 3, Reader(store), None, 0.0, {})
    varied = choose(order, fused, 3, Reader(store), None, 0.9, {})
    assert [m.id for m in plain.memories] == ["p1", "other", "o2"]
    assert [m.id for m in varied.memories] == ["p1", "other", "bday"]


@given(st.integers(1, 6), st.integers(0, 2**31), st.booleans())
def test_nothing_is_lost_every_candidate_up_to_the_cut_is_a_hit_or_named_on_one(
    k: int, seed: int, collapse: bool
) -> None:
    rng = np.random.default_rng(seed)
    store = Store()
    ids = [f"m{i}" for i in range(12)]
    base = rng.standard_normal((4, 8))
    for n, memory_id in enumerate(ids):  # three near-copies of four facts
        vector = base[n % 4] + 0.05 * rng.standard_normal(8)
        store.put(memory_id, f"fact {n % 4}", vector, day=1 + n)
    fused = {i: 1.0 / (60 + r) for r, i in enumerate(ids, start=1)}
    chosen = choose(ids, fused, k, Reader(store), RULE if collapse else None, 0.0, {})
    shown = [m.id for m in chosen.memories]
    covered = [i for s in shown for i in (s, *chosen.similar_ids(s))]
    assert len(covered) == len(set(covered))  # each memory once
    last = max(ids.index(i) for i in covered)
    assert set(ids[: last + 1]) <= set(covered)  # nothing above the cut hidden
    assert len(shown) == (min(k, 4) if collapse else k)
