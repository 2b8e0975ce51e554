"""An index file opened with memories in it builds its BM25 postings on a thread of its
own: searches meanwhile are ranked by FTS5 (the same scores), and the writes made
between the build's snapshot and its hand-over are in the postings afterwards."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.query_words import query_words
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"
WORDS = ["wing", "flow", "shock", "tunnel", "lift", "drag", "vortex", "blade", "nozzle", "jet"]


def rows(prefix: str, n: int, rng: random.Random, at: float) -> list[IndexRow]:
    return [
        IndexRow(
            f"{prefix}{i}",
            " ".join(rng.choices(WORDS, k=rng.randint(2, 8))) + f" tok{prefix}{i}",
            (),
            {},
            f"h{prefix}{i}",
            at,
            at,
        )
        for i in range(n)
    ]


def ranking(index: KeywordIndex, query: str) -> list[tuple[str, float]]:
    return index.search(query, 50)


def assert_same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    assert [h[0] for h in got] == [h[0] for h in expected]
    assert [h[1] for h in got] == pytest.approx([h[1] for h in expected], rel=1e-9)


def test_a_reopened_file_ranks_by_fts5_then_by_postings_that_caught_up(tmp_path: Path) -> None:
    rng = random.Random(5)
    path = str(tmp_path / "k.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    first.upsert(rows("a", 300, rng, 1.0))
    assert first.keywords.postings is not None  # filled from empty: postings all along
    before = first.search("wing shock", 50)
    first.close()

    index = KeywordIndex(path, TOKENIZER)
    assert index.keywords.postings is None
    while_building = ranking(index, "wing shock")  # starts the build aside
    assert while_building
    builder = index.keywords.keeper._aside
    assert builder is not None
    builder.join(timeout=60)
    assert not builder.is_alive()
    assert index.keywords.postings is None  # built, not handed over yet

    # Written after the build's snapshot: new rows, a replaced one, a deleted one.
    index.upsert(rows("b", 20, rng, 2.0))
    index.upsert([IndexRow("a7", "vortex vortex vortex toka7", (), {}, "new", 1.0, 3.0)])
    index.delete(["a8"])
    queries = ("wing shock", "vortex", "toka8", "tokb3")
    rebuilt = {q: ranking(index, q) for q in queries}
    assert index.keywords.postings is not None  # handed over by the first of those
    assert index.keywords.postings.live_rowids().size == index.count() == 319
    assert rebuilt["toka8"] == []
    assert rebuilt["tokb3"][0][0] == "b3"
    assert rebuilt["vortex"][0][0] == "a7"
    for query in queries:  # the postings rank as FTS5 itself does
        assert_same_ranking(rebuilt[query], index.keywords.search_fts(query_words(query), 50, None))
    assert_same_ranking(while_building, before)  # FTS5 ranked as the postings did
    index.close()
