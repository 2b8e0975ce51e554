"""Every way the keyword index ranks (its numpy postings, its compiled loops, SQLite
FTS5's own ``bm25()`` for words it reads as phrases) against one reference scorer:
``rank_bm25.BM25Okapi`` with the index's parameters (k1 = 1.2, b = 0.75) and FTS5's floor
for the idf of a term in half the memories or more (1e-6), over the index's own terms.

The corpus is a slice of the shared Cranfield collection (real text: stems, repeats,
common and rare words), its queries the collection's own."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from rank_bm25 import BM25Okapi

from hybrid_memory._keyword import scoring_kernel
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.query_words import _TOKEN, query_words
from hybrid_memory._model.records import IndexRow

from ..conftest import SHARED_DATA

CRANFIELD = SHARED_DATA / "cranfield"
DOCUMENTS = 400
QUESTIONS = 60
K1, B, FLOOR = 1.2, 0.75, 1e-6


def read_jsonl(path: Path, limit: int) -> list[dict[str, str]]:
    with path.open() as lines:
        return [json.loads(line) for line, _ in zip(lines, range(limit), strict=False)]


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, str]]:
    if not CRANFIELD.is_dir():
        pytest.skip(f"the shared collections are not at {SHARED_DATA}")
    return read_jsonl(CRANFIELD / "corpus.jsonl", DOCUMENTS)


@pytest.fixture(scope="module")
def index(corpus: list[dict[str, str]]) -> Iterator[KeywordIndex]:
    built = KeywordIndex(None, "porter unicode61 remove_diacritics 2")
    rows = [IndexRow(d["_id"], d["text"], (), {}, f"h{d['_id']}", n) for n, d in enumerate(corpus)]
    built.upsert(rows)
    yield built
    built.close()


def reference(index: KeywordIndex, corpus: list[dict[str, str]]) -> BM25Okapi:
    """rank_bm25 over each memory's terms as the index's tokenizer makes them."""
    documents = []
    for d in corpus:
        words = _TOKEN.findall(d["text"])
        documents.append([t for word_terms in index.terms(words) for t in word_terms])
    scorer = BM25Okapi(documents, k1=K1, b=B)
    frequency: dict[str, int] = {}
    for counts in scorer.doc_freqs:
        for term in counts:
            frequency[term] = frequency.get(term, 0) + 1
    for term, df in frequency.items():  # FTS5's idf floor, for rank_bm25's epsilon rule
        idf = math.log((scorer.corpus_size - df + 0.5) / (df + 0.5))
        scorer.idf[term] = idf if idf > 0 else FLOOR
    return scorer


def expected(
    index: KeywordIndex, scorer: BM25Okapi, corpus: list[dict[str, str]], text: str, limit: int
) -> list[tuple[str, float]]:
    terms = [t for word_terms in index.terms(query_words(text)) for t in word_terms]
    scores = scorer.get_scores(terms)
    ranked = sorted(range(len(corpus)), key=lambda n: (-scores[n], n))
    return [(corpus[n]["_id"], float(scores[n])) for n in ranked[:limit] if scores[n] > 0]


def assert_same(ours: list[tuple[str, float]], theirs: list[tuple[str, float]]) -> None:
    """Same scores position by position (to 1e-9), and the same ids where not tied."""
    assert len(ours) == len(theirs)
    for (our_id, a), (their_id, b) in zip(ours, theirs, strict=True):
        assert a == pytest.approx(b, rel=1e-9)
        tied = sum(math.isclose(s, b, rel_tol=1e-9) for _, s in theirs) > 1
        assert tied or our_id == their_id


def questions() -> list[str]:
    if not CRANFIELD.is_dir():
        return []
    return [q["text"] for q in read_jsonl(CRANFIELD / "queries.jsonl", QUESTIONS)]


@pytest.mark.parametrize("path", ["numpy", "compiled", "fts5"])
def test_every_ranking_is_the_reference_scorers(
    index: KeywordIndex, corpus: list[dict[str, str]], path: str
) -> None:
    scorer = reference(index, corpus)
    loops = None
    if path == "compiled":
        loops = scoring_kernel.load(timeout=120)
        if loops is None:
            pytest.skip(f"no compiled loops here: {scoring_kernel.status()}")
    previous = scoring_kernel.use(loops)
    try:
        for text in questions():
            if path == "fts5":
                ours = index.keywords.search_fts(query_words(text), 10, None)
            else:
                ours = index.search(text, 10)
            assert_same(ours, expected(index, scorer, corpus, text, 10))
    finally:
        scoring_kernel.use(previous)
