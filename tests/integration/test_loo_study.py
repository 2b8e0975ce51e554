"""The leave-one-collection-out study measures the engine's defaults, and its router is
the pure function it says.

``benchmarks/loo_study.py`` fuses configurations from legs computed once; its
conclusions (docs/quality-study.md) hold only while its "defaults" rank as the engine's
search does. This checks that on a small collection through a real store (real SQLite
FTS5, real Chroma, the real default model; at this size Chroma's search is exact), the
router on a table of queries, and the study end to end on two collections.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

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
]
QUERIES = [
    ("q1", "what is known about heat transfer in boundary layers?", {"d1": 1, "d2": 2}),
    ("q2", "panel flutter at high speeds", {"d4": 2, "d3": 1}),
    ("q3", "buckling of shells", {"d5": 1, "d6": 1}),
    ("q4", "where did the dog go", {"d8": 1}),
    (
        "q5",
        "what experiments on the flutter of thin panels at supersonic speeds show the "
        "effect of pressure and of the boundary layer",
        {"d4": 2},
    ),
]


def _write(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 4 content words: neither prose nor keywords, alpha unchanged
        ("where did Caroline go camping", 0.5),
        # 10 content words: prose, raised
        (
            "what similarity laws must be obeyed when constructing aeroelastic models of "
            "heated high speed aircraft",
            0.7,
        ),
        # three words, all content: keyword-like, lowered
        ("fts5 tokenizer porter", 0.4),
        # three words with a stopword: not keyword-like
        ("the porter tokenizer", 0.5),
    ],
)
def test_routed_alpha_moves_alpha_by_query_kind(text: str, expected: float) -> None:
    from benchmarks.loo_study import Router, routed_alpha

    router = Router(long_from=10, long_shift=0.2, short_upto=3, short_shift=0.1)
    assert routed_alpha(0.5, text, router) == pytest.approx(expected)


def test_routed_alpha_stays_within_zero_and_one() -> None:
    from benchmarks.loo_study import Router, routed_alpha

    prose = "one two three four five six seven eight nine ten eleven twelve words here"
    assert routed_alpha(0.9, prose, Router(long_from=5, long_shift=0.5)) == 1.0
    assert routed_alpha(0.05, "qdrant", Router(short_upto=2, short_shift=0.3)) == 0.0


@pytest.mark.slow
def test_the_study_defaults_rank_as_the_engine_and_the_study_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hybrid_memory_eval import build_memory, load_dataset

    from benchmarks import loo_study
    from benchmarks.fusion_study import prepare
    from benchmarks.vector_cache import CachedEmbedding
    from hybrid_memory._embedding.default_model import MiniLMEmbedder

    cache = tmp_path / "vectors.sqlite"
    monkeypatch.setenv("HYBRID_MEMORY_VECTOR_CACHE", str(cache))
    first = _write(tmp_path / "tiny")
    embedding = CachedEmbedding(MiniLMEmbedder(), path=cache)
    prep = prepare(str(first), embedding)
    dataset = load_dataset(str(first))
    memory = build_memory(dataset, {}, embedding=embedding)
    try:
        for q in prep.queries:
            engine = [hit.id for hit in memory.search(q.text, k=len(TEXTS))]
            study = loo_study.ranked(prep, q, loo_study.DEFAULTS)[: len(TEXTS)]
            assert study == engine, q.text
    finally:
        memory.close()

    second = tmp_path / "tiny2"
    shutil.copytree(first, second)
    out = tmp_path / "loo.json"
    assert loo_study.main([str(first), str(second), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["collections"] == ["tiny", "tiny2"]
    assert len(report["table"]) == len(loo_study.variants())
    for fold in report["folds"]:
        assert fold["chosen"] in report["table"]
        assert fold["defaults_on_held_out"] == report["table"]["defaults"][fold["held_out"]]
        assert 0 < fold["p"] <= 1
    assert "router: >= 10 content words +0.2" in capsys.readouterr().out
