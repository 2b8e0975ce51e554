"""The keyword leg's scores are BM25 as SQLite FTS5 computes it, held to a reference
scorer: ``rank_bm25.BM25Okapi`` (LangChain's BM25) set to FTS5's parameters (k1 = 1.2,
b = 0.75; the same idf, ln((N - df + 0.5) / (df + 0.5)), for words in fewer than half
of the memories, where rank_bm25's floor and FTS5's do not apply).

Read through the public API only (``Hit.scores["keyword"]``), so it holds whatever the
keyword index does inside."""

from __future__ import annotations

import random
import re

import pytest
from rank_bm25 import BM25Okapi

from hybrid_memory import HybridMemory

# Words the index's tokenizer (porter unicode61) keeps one to one: each stems to a term
# of its own, so counting the words counts the index's terms.
VOCABULARY = [
    "river",
    "bridge",
    "harbor",
    "lantern",
    "copper",
    "meadow",
    "falcon",
    "orchard",
    "granite",
    "velvet",
    "thunder",
    "saddle",
    "compass",
    "ember",
    "glacier",
    "walnut",
]
FILLER = ["the", "a", "of", "and", "in"]  # stopwords: indexed (document length), never asked


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_keyword_scores_are_bm25_as_the_reference_computes_it(
    memory: HybridMemory, seed: int
) -> None:
    rng = random.Random(seed)
    texts = []
    for _ in range(24):
        words = rng.choices(VOCABULARY, k=rng.randint(3, 12)) + rng.choices(FILLER, k=3)
        rng.shuffle(words)
        texts.append(" ".join(words))
    ids = memory.add_many(texts, allow_duplicates=True)
    reference = BM25Okapi([tokens(t) for t in texts], k1=1.2, b=0.75)
    # Query words found in fewer than half of the memories (where both idfs agree).
    counts = {w: sum(w in tokens(t) for t in texts) for w in VOCABULARY}
    rare = [w for w in VOCABULARY if 0 < counts[w] < len(texts) / 2]
    assert len(rare) >= 2, counts
    for query in (rare[:1], rare[:2], rare[-3:]):
        expected = dict(zip(ids, reference.get_scores(query), strict=True))
        # Every hit on its own: texts of one small vocabulary can be near-duplicates.
        hits = memory.with_settings(collapse_similar=False).search(" ".join(query), k=len(texts))
        scored = {h.id: h.scores["keyword"] for h in hits if "keyword" in h.scores}
        assert scored, query
        assert set(scored) == {i for i, score in expected.items() if score > 0}
        for memory_id, score in scored.items():
            assert score == pytest.approx(expected[memory_id], rel=1e-9), (query, memory_id)
