"""The fusion study's own keyword scoring is the engine's keyword leg.

``benchmarks/prf_study.py`` re-scores BM25 with a weight per query term (for query
expansion) from the keyword index's postings. Its conclusions hold only while that
scoring, with every query term at weight 1, ranks exactly as the engine's keyword leg
does: this checks it on a small collection through a real store (real SQLite FTS5 and
its Porter stems, the real default model), and that the study runs end to end.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

pytestmark = pytest.mark.slow

TEXTS = [
    "the boundary layer on a flat plate in supersonic flow",
    "heat transfer in the laminar boundary layer of a cone",
    "boundary layers and their transition to turbulence at high speeds",
    "the flutter of wings in a slipstream, and of panels",
    "panel flutter at supersonic speeds: experiments",
    "a note on the buckling of thin cylindrical shells under pressure",
    "shells under axial compression buckle at lower loads than theory says",
    "what Alice said about her dog and the park",
    "the dog and the cat went to the park with Bob",
    "stagnation point heat transfer in dissociated air " + "flow " * 300,
]
QUERIES = [
    ("q1", "what is known about heat transfer in boundary layers?", {"d1": 1, "d2": 2}),
    ("q2", "panel flutter at high speeds", {"d4": 2, "d3": 1}),
    ("q3", "buckling of shells", {"d5": 1, "d6": 1}),
    ("q4", "where did the dog go", {"d8": 1}),
    # two words, one stem: the engine scores the stem twice
    ("q5", "layer or layers in the flow of heat", {"d0": 1, "d1": 1}),
]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    with open(folder / "corpus.jsonl", "w") as f:
        for i, text in enumerate(TEXTS):
            f.write(json.dumps({"_id": f"d{i}", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w") as f:
        for qid, text, _ in QUERIES:
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with open(folder / "qrels.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, _, judged in QUERIES:
            for doc, grade in judged.items():
                f.write(f"{qid}\t{doc}\t{grade}\n")
    return folder


@pytest.fixture(scope="module")
def prepared(collection: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    from benchmarks.fusion_study import prepare
    from benchmarks.prf_study import term_stats
    from benchmarks.vector_cache import CachedEmbedding

    embedding = CachedEmbedding(path=tmp_path_factory.mktemp("vectors") / "v.sqlite")
    prep = prepare(str(collection), embedding)
    return prep, term_stats(str(collection), prep, embedding), embedding


def test_weighted_bm25_at_weight_one_ranks_as_the_keyword_leg(prepared: tuple) -> None:
    from benchmarks.prf_study import bm25, query_weights

    prep, terms, _ = prepared
    for q in prep.queries:
        mine = bm25(prep, terms, q, query_weights(terms, q), 50)
        engine = q.keyword[True][:50]
        assert [d for d, _ in mine] == [d for d, _ in engine], q.text
        assert [s for _, s in mine] == pytest.approx([s for _, s in engine], rel=1e-6)


def test_expansion_adds_content_terms_of_the_feedback_memories(prepared: tuple) -> None:
    from benchmarks.prf_study import Expansion, bo1, expanded_keyword

    prep, terms, _ = prepared
    index = {d: i for i, d in enumerate(prep.ids)}
    added = bo1(terms, [index["d4"], index["d3"]], 5)
    words = {t: w for t, w in terms.vocab.items()}
    names = {i: t for t, i in words.items()}
    assert added and max(added.values()) == pytest.approx(1.0)
    assert not any(terms.stop[t] for t in added)  # no stopword comes back as a term
    assert "flutter" in {names[t] for t in added}
    q = next(q for q in prep.queries if q.id == "q2")
    expanded = expanded_keyword(prep, terms, q, Expansion("t", "keyword"), 50, index)
    # the expansion reaches a memory sharing no word with the query but the feedback's
    assert {d for d, _ in expanded} > {d for d, _ in q.keyword[True]}


def test_long_texts_are_measured_and_windowed(prepared: tuple) -> None:
    from benchmarks.prf_study import window_matrix

    prep, _, embedding = prepared
    windowed, stats = window_matrix(prep, embedding)
    # the long text (about 310 pieces) is two windows of 254, 127 apart; the rest one each
    assert stats["over_window"] == 1 and stats["windows"] == len(TEXTS) + 1
    assert windowed.shape == prep.matrix.shape
    fits = [i for i, d in enumerate(prep.ids) if d != "d9"]
    assert windowed[fits] == pytest.approx(prep.matrix[fits])


def test_the_study_prints_every_collection_and_the_defaults(
    collection: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import prf_study

    monkeypatch.setenv("HYBRID_MEMORY_VECTOR_CACHE", str(collection / "vectors.sqlite"))
    assert prf_study.main([str(collection), "--only", "defaults, keyword cut at 0.4"]) == 0
    out = capsys.readouterr().out
    assert "defaults, keyword cut at 0.4 of top" in out and "tiny" in out
