"""The tag leg of a search keeps its SQL work between the two rankings of one search.

Reference: the straightforward tag leg (what the search did before), which asks the
index for the newest carriers and for every evidence id again at each ranking. The
search must give exactly the same hits, scores and ranks with either.

The tag leg's class and its queries to the index are what these tests are about, so
this module reaches them, through TagLegInternals only (rename there when they move).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from hybrid_memory import HybridMemory
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.query_words import STOPWORDS
from hybrid_memory._keyword.tag_index import TagMatch
from hybrid_memory._model.filters import Node
from hybrid_memory._model.tags import words
from hybrid_memory._search import searcher as search_module
from hybrid_memory._search.legs import Scope

from ..conftest import HashEmbedding

TEXT = (
    "alice bob carol dave deploy key rotates dark mode editor peanuts allergy trip tokyo "
    "new york budget meeting notes garden tomatoes piano lesson marathon training plan "
    "server outage database backup invoice tax doctor appointment birthday gift"
)
WORDS = TEXT.split()
TAGS = ["alice", "bob", "carol", "work", "health", "travel", "new york", "tokyo", "garden"]
DAY = 86_400.0


class TagLegInternals:
    """The one place this module reaches inside the store: where the search finds its
    tag leg's class, and the index method the tag leg asks for tag carriers."""

    LEG = (search_module, "TagLeg")

    @staticmethod
    @contextlib.contextmanager
    def recording(store: HybridMemory) -> Iterator[list[tuple[str, tuple[str, ...], Any]]]:
        """The tag leg's calls to the index while in the block: ``(method, tags, ids)``
        each: ``("ranking", tags, ranked ids)`` for the whole ranking from the carriers in
        memory, ``("carriers", tags, None)`` for the newest carriers by SQL and
        ``("carriers", tags, ids)`` for the carriers among ``ids``."""
        index = store._parts.index
        carriers, ranking = index.tag_carriers, index.tag_ranking
        calls: list[tuple[str, tuple[str, ...], Any]] = []

        def recording_carriers(
            tags: tuple[str, ...], limit: int, where: Any = None, among: Any = None, **kw: Any
        ) -> list[TagMatch]:
            calls.append(("carriers", tuple(tags), None if among is None else list(among)))
            return carriers(tags, limit, where, among, **kw)

        def recording_ranking(
            tags: tuple[str, ...], depth: int, ranks: Mapping[str, int], *args: Any, **kw: Any
        ) -> dict[str, int]:
            calls.append(("ranking", tuple(tags), list(ranks)))
            return ranking(tags, depth, ranks, *args, **kw)

        index.tag_carriers = recording_carriers  # type: ignore[method-assign]
        index.tag_ranking = recording_ranking  # type: ignore[method-assign]
        try:
            yield calls
        finally:
            del index.tag_carriers
            del index.tag_ranking


class ReferenceTagLeg:
    """The tag leg as it was: both queries again at every ranking."""

    def __init__(
        self,
        index: KeywordIndex,
        tags: tuple[str, ...],
        depth: int,
        node: Node | None,
        exclude: str | None,
        scope: Any = None,  # the memories passing node: not used, node is
        text: str = "",
        keyword_ids: Any = (),
    ) -> None:
        self.args = (index, tags, depth, node, exclude)
        self.text = text
        self.keyword_ids = set(keyword_ids)

    def rank(self, evidence: Mapping[str, int]) -> dict[str, int]:
        index, tags, depth, node, exclude = self.args
        if not tags:
            return {}
        rows = index.tag_carriers(tags, depth, node)
        if evidence:
            rows += index.tag_carriers(tags, len(evidence), node, among=list(evidence))
        best: dict[str, tuple[int, float, int]] = {}
        for match in rows:
            if match.id != exclude:
                best[match.id] = (match.matched, match.created_at, match.row)
        # A memory with the query's words, stopwords aside (so found by the keyword
        # leg), also matches the asked tags its text names.
        query = set(words(self.text)) - STOPWORDS or set(words(self.text))
        rowids = index.ids_cache.rowids_of(list(evidence))
        for memory_id, row in index.rows([i for i in evidence if i in self.keyword_ids]).items():
            said = set(words(row.text))
            if memory_id == exclude or (said - STOPWORDS or said) != query:
                continue
            named = {
                t for t in tags if f" {' '.join(words(t))} " in f" {' '.join(words(row.text))} "
            }
            matched = len(named | (set(tags) & set(row.tags)))
            if matched > best.get(memory_id, (0, 0.0, 0))[0]:
                best[memory_id] = (matched, row.created_at, rowids[memory_id])
        ordered = sorted(
            best,
            key=lambda i: (-best[i][0], evidence.get(i, math.inf), -best[i][1], best[i][2]),
        )
        return {i: best[i][0] for i in ordered[:depth]}


@pytest.fixture(scope="module")
def store() -> Iterator[HybridMemory]:
    rng = random.Random(5)
    items: list[dict[str, Any]] = []
    for i in range(400):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + f" n{i}"
        items.append(
            {
                "text": text,
                "tags": rng.sample(TAGS, rng.choice([0, 1, 1, 2, 3])),
                "metadata": {"user": f"u{rng.randrange(3)}", "score": rng.random()},
                # whole days from a small range: many memories share a creation time
                "created_at": 1.7e9 + rng.randrange(20) * DAY,
            }
        )
    # and a batch written in one call without times: all created at the same instant
    items += [
        {"text": f"{rng.choice(WORDS)} {rng.choice(WORDS)} batch {i}", "tags": ["work", "bob"]}
        for i in range(60)
    ]
    with HybridMemory(
        embedding=HashEmbedding(), embedding_name="test-hash-64", candidates=25
    ) as memory:
        memory.add_many(items)
        yield memory


def _searches(store: HybridMemory) -> list[Any]:
    rng = random.Random(9)
    results = []
    ids = [h.id for h in store.search("alice bob work", k=50)]
    for i in range(40):
        query = " ".join(rng.choice(WORDS + TAGS) for _ in range(rng.randint(1, 6)))
        where = [None, {"user": "u1"}, {"score": {"$gt": 0.3}}][i % 3]
        extra = rng.sample(TAGS, rng.randint(0, 2)) or None
        results.append(store.search(query, k=10, filter=where, tags=extra, now=1.8e9))
    for memory_id in ids[:10]:
        results.append(store.related(memory_id, k=10))
    return [(r.matched_tags, [(h.id, h.score, h.ranks, h.scores) for h in r]) for r in results]


@pytest.mark.parametrize("filters", ["resolved to rows", "left to SQL"])
def test_search_results_equal_the_straightforward_tag_leg(
    store: HybridMemory, monkeypatch: pytest.MonkeyPatch, filters: str
) -> None:
    if filters == "left to SQL":  # every filter broader than the narrow limit
        monkeypatch.setattr(Scope, "NARROW", 0)
        monkeypatch.setattr(Scope, "SHARE", 10**9)
    kept = _searches(store)
    monkeypatch.setattr(*TagLegInternals.LEG, ReferenceTagLeg)
    reference = _searches(store)
    assert any(ranks.get("tag") for _, hits in reference for _, _, ranks, _ in hits)
    assert kept == reference


def test_a_search_asks_for_its_tag_ranking_once(store: HybridMemory) -> None:
    with TagLegInternals.recording(store) as calls:
        result = store.search("alice work plan for the tokyo trip", k=10)
    assert result.matched_tags  # the query names known tags
    assert [(method, tags) for method, tags, _ in calls] == [("ranking", result.matched_tags)]
    ranked = calls[0][2]
    assert len(ranked) == len(set(ranked))  # each of the other legs' hits once
    assert {h.id for h in result if "vector" in h.ranks or "keyword" in h.ranks} <= set(ranked)


def test_a_filter_left_to_sql_reads_newest_and_ranked_carriers_once_each(
    store: HybridMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A filter passing more than the narrow limit is tested by each leg (SQL here).
    monkeypatch.setattr(Scope, "NARROW", 0)
    monkeypatch.setattr(Scope, "SHARE", 10**9)
    with TagLegInternals.recording(store) as calls:
        result = store.search("alice work plan for the tokyo trip", k=10, filter={"user": "u1"})
    assert result.matched_tags
    assert [(method, among is None) for method, _, among in calls] == [
        ("carriers", True),
        ("carriers", False),
    ]
    asked = calls[1][2]
    assert len(asked) == len(set(asked))  # no id asked twice


def test_no_tags_no_queries(store: HybridMemory) -> None:
    with TagLegInternals.recording(store) as calls:
        result = store.search("deploy key rotates", k=10)  # names no known tag
    assert result.matched_tags == ()
    assert result and all("tag" not in h.ranks for h in result)
    assert calls == []
