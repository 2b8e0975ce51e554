"""``benchmarks/long_distractors.py`` adds long unjudged memories to each session, and
``benchmarks/bm25_b_study.py`` maps a store's memory lengths to BM25's b
(docs/quality-study.md, "Issue 43, round five")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.bm25_b_study import (
    GRID,
    Lengths,
    cv_linear,
    cv_scaled,
    fixed_b,
    normalisation_effect,
    snap,
)
from benchmarks.long_distractors import main, with_distractors


def turns() -> list[dict]:
    out = []
    for session in (1, 2, 3):
        for n in range(4):
            out.append(
                {
                    "_id": f"c:D{session}:{n}",
                    "text": f"s{session} t{n}",
                    "tags": [f"speaker{n % 2}"],
                    "timestamp": f"2023-0{session}-01T00:00:00+00:00",
                    "metadata": {"conversation": "c", "session": session},
                }
            )
    out.append({"_id": "d:D1:0", "text": "alone", "metadata": {"conversation": "d", "session": 1}})
    return out


def test_distractors_come_from_the_other_sessions_of_the_same_conversation() -> None:
    docs = turns()
    out = with_distractors(docs, per_session=2, turns=3, seed=1)
    assert out[: len(docs)] == docs
    added = out[len(docs) :]
    # conversation "d" has no other session to draw from: it gets none
    assert len(added) == 3 * 2
    for d in added:
        session = d["metadata"]["session"]
        words = d["text"].split()
        assert len(words) == 3 * 2
        assert all(w != f"s{session}" for w in words[::2])
        assert d["metadata"]["conversation"] == "c"
        assert d["timestamp"] == f"2023-0{session}-01T00:00:00+00:00"
        assert "tags" not in d


def test_contiguous_distractors_are_runs_of_one_session_and_tagged_ones_keep_the_tags() -> None:
    out = with_distractors(turns(), per_session=1, turns=3, seed=2, contiguous=True, tagged=True)
    for d in out[len(turns()) :]:
        words = d["text"].split()
        sessions = set(words[::2])
        assert len(sessions) == 1 and sessions != {f"s{d['metadata']['session']}"}
        numbers = [int(w[1:]) for w in words[1::2]]
        assert numbers == list(range(numbers[0], numbers[0] + 3))
        assert d["tags"] == ["speaker0", "speaker1"]


def test_the_same_seed_gives_the_same_store_and_tags_do_not_change_the_texts() -> None:
    a = with_distractors(turns(), 2, 3, seed=5, contiguous=True)
    assert a == with_distractors(turns(), 2, 3, seed=5, contiguous=True)
    tagged = with_distractors(turns(), 2, 3, seed=5, contiguous=True, tagged=True)
    assert [d["text"] for d in a] == [d["text"] for d in tagged]
    assert a != with_distractors(turns(), 2, 3, seed=6, contiguous=True)


def test_the_copy_keeps_queries_and_judgments(tmp_path: Path) -> None:
    source = tmp_path / "c"
    source.mkdir()
    (source / "corpus.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns()))
    (source / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "s1?"}) + "\n")
    (source / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq\tc:D1:0\t1\n")
    assert main([str(source), str(tmp_path / "out"), "--per-session", "1", "--turns", "2"]) == 0
    lines = (tmp_path / "out" / "corpus.jsonl").read_text().splitlines()
    assert len(lines) == len(turns()) + 3
    for name in ("queries.jsonl", "qrels.tsv"):
        assert (tmp_path / "out" / name).read_text() == (source / name).read_text()


def test_snap_rounds_to_the_grid_and_clips() -> None:
    assert GRID[0] == 0.3 and GRID[-1] == 1.0 and len(GRID) == 15
    assert snap(0.74) == 0.75
    assert snap(0.1) == 0.3
    assert snap(1.7) == 1.0


def test_lengths_leave_out_empty_memories_and_give_the_cv() -> None:
    lengths = Lengths.of(np.array([0.0, 10.0, 30.0], dtype=np.float32))
    assert lengths.tokens.tolist() == [10.0, 30.0]
    assert lengths.cv == pytest.approx(10.0 / 20.0)


def test_the_normalisation_factor_spreads_more_with_b_and_not_at_all_at_zero() -> None:
    lengths = Lengths(np.array([5.0, 20.0, 80.0]))
    assert lengths.normalisation_spread(0.0) == 0.0
    spreads = [lengths.normalisation_spread(b) for b in (0.25, 0.5, 0.75, 1.0)]
    assert spreads == sorted(spreads)
    # at b 1 the factor is avgdl / |d|
    factor = 35.0 / np.array([5.0, 20.0, 80.0])
    assert lengths.normalisation_spread(1.0) == pytest.approx(factor.std() / factor.mean())


def test_the_rules_map_the_spread_to_b() -> None:
    narrow = Lengths(np.array([9.0, 10.0, 11.0]))  # cv 0.08
    wide = Lengths(np.array([1.0, 1.0, 10.0]))  # cv 1.08
    assert fixed_b(0.6, 0.5)(wide) == (0.6, 0.5)
    assert cv_scaled(1.2, 0.0)(narrow) == (0.3, 0.0)
    assert cv_scaled(1.2, 0.0)(wide) == (1.0, 0.0)
    assert cv_linear(0.75, 1.0, 0.0)(Lengths(np.array([1.0, 3.0]))) == (0.75, 0.0)
    # the normalisation effect gives a wider store a lower b
    assert normalisation_effect(0.3, 0.0)(wide)[0] < normalisation_effect(0.3, 0.0)(narrow)[0]


def test_the_postings_read_b_where_the_studies_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # bm25_b_study and lift_gating_study set bm25_scores.B for their searches; since the
    # compiled loops (4e16425) postings.B is a re-export that nothing reads.
    from hybrid_memory._keyword import bm25_scores

    per_length, constant, _ = bm25_scores.bm25_factors(10.0, 1.0)
    assert (per_length, constant) == (1.2 * 0.75 / 10.0, 1.2 * 0.25)
    monkeypatch.setattr(bm25_scores, "B", 1.0)
    per_length, constant, _ = bm25_scores.bm25_factors(10.0, 1.0)
    assert (per_length, constant) == (1.2 / 10.0, 0.0)
