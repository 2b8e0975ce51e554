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
from hybrid_memory import _search as search_module
from hybrid_memory._filters import Node
from hybrid_memory._index.bm25 import STOPWORDS
from hybrid_memory._index.index import KeywordIndex
from hybrid_memory._index.tags import TagMatch
from hybrid_memory._tags import words

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
    def recording(store: HybridMemory) -> Iterator[list[tuple[tuple[str, ...], Any]]]:
        """The tag leg's carrier queries while in the block: ``(tags, among)`` each, where
        ``among`` is None for the newest carriers and else the ids asked about."""
        index = store._parts.index
        carriers = index.tag_carriers
        calls: list[tuple[tuple[str, ...], Any]] = []

        def recording(
            tags: tuple[str, ...], limit: int, where: Any = None, among: Any = None, **kw: Any
        ) -> list[TagMatch]:
            calls.append((tuple(tags), None if among is None else list(among)))
            return carriers(tags, limit, where, among, **kw)

        index.tag_carriers = recording  # type: ignore[method-assign]
        try:
            yield calls
        finally:
            del index.tag_carriers


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
        best: dict[str, tuple[int, float]] = {}
        for match in rows:
            if match.id != exclude:
                best[match.id] = (match.matched, match.created_at)
        # A memory with the query's words, stopwords aside (so found by the keyword
        # leg), also matches the asked tags its text names.
        query = set(words(self.text)) - STOPWORDS or set(words(self.text))
        for memory_id, row in index.rows([i for i in evidence if i in self.keyword_ids]).items():
            said = set(words(row.text))
            if memory_id == exclude or (said - STOPWORDS or said) != query:
                continue
            named = {
                t for t in tags if f" {' '.join(words(t))} " in f" {' '.join(words(row.text))} "
            }
            matched = len(named | (set(tags) & set(row.tags)))
            if matched > best.get(memory_id, (0, 0.0))[0]:
                best[memory_id] = (matched, row.created_at)
        ordered = sorted(best, key=lambda i: (-best[i][0], evidence.get(i, math.inf), -best[i][1]))
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


def test_search_results_equal_the_straightforward_tag_leg(
    store: HybridMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _searches(store)
    monkeypatch.setattr(*TagLegInternals.LEG, ReferenceTagLeg)
    reference = _searches(store)
    assert any(ranks.get("tag") for _, hits in reference for _, _, ranks, _ in hits)
    assert kept == reference


def test_the_second_ranking_asks_only_for_new_evidence(store: HybridMemory) -> None:
    with TagLegInternals.recording(store) as calls:
        result = store.search("alice work plan for the tokyo trip", k=10)
    assert result.matched_tags  # the query names known tags
    newest = [among for _, among in calls if among is None]
    asked = [among for _, among in calls if among is not None]
    assert len(newest) == 1  # once, not once per ranking
    assert 1 <= len(asked) <= 2
    flat = [i for among in asked for i in among]
    assert len(flat) == len(set(flat))  # no id asked twice


def test_no_tags_no_queries(store: HybridMemory) -> None:
    with TagLegInternals.recording(store) as calls:
        result = store.search("deploy key rotates", k=10)  # names no known tag
    assert result.matched_tags == ()
    assert result and all("tag" not in h.ranks for h in result)
    assert calls == []
