"""``benchmarks/repeats.py`` runs end to end on a small collection and reports every
figure; its restatements and its fact-level nDCG say what its docstring says."""

from __future__ import annotations

import math
from pathlib import Path

from hybrid_memory_eval import Document, load_dataset

from benchmarks.repeats import FORMS, fact_ndcg, render, restate, restatements, run

from ..conftest import HashEmbedding, write_collection


def small(folder: Path) -> Path:
    corpus = [
        {
            "_id": "t1",
            "text": "Alice is allergic to peanuts",
            "timestamp": "2026-01-01T10:00:00+00:00",
        },
        {
            "_id": "t2",
            "text": "Bob plays chess on Tuesdays",
            "timestamp": "2026-01-02T10:00:00+00:00",
        },
        {
            "_id": "t3",
            "text": "Carol moved to Lisbon in May",
            "timestamp": "2026-01-03T10:00:00+00:00",
        },
        {
            "_id": "t4",
            "text": "Dan drinks green tea after lunch",
            "timestamp": "2026-01-04T10:00:00+00:00",
        },
    ]
    queries = [
        {"_id": "q1", "text": "what is alice allergic to"},
        {"_id": "q2", "text": "where did carol move"},
    ]
    return write_collection(folder, corpus, queries, {"q1": "t1", "q2": "t3"})


def test_the_four_forms_keep_the_turns_words() -> None:
    turn = Document("t", "Alice is allergic to peanuts.", timestamp="2026-05-08T10:00:00+00:00")
    said = [restate(turn, form, days_later=3)[0] for form in range(len(FORMS))]
    assert said == [
        "2026-05-11: Alice is allergic to peanuts.",
        "Alice is allergic to peanuts. (confirmed again)",
        "Alice is allergic to peanuts, per the chat on May 11, 2026.",
        "allergic to peanuts. Alice is",
    ]


def test_each_evidence_turn_is_restated_one_to_four_times(tmp_path: Path) -> None:
    dataset = load_dataset(small(tmp_path / "small"))
    again = restatements(dataset, seed=7)
    per_turn = {r.of: 0 for r in again}
    for r in again:
        per_turn[r.of] += 1
    assert set(per_turn) == {"t1", "t3"} and all(1 <= n <= 4 for n in per_turn.values())
    assert restatements(dataset, seed=7) == again  # seeded


def test_a_fact_counts_once_where_it_first_appears() -> None:
    fact = {"t1#again0": "t1"}
    grades = {"t1": 1, "t3": 1}
    once, facts = fact_ndcg(["t1", "t3"], grades, fact, 10)
    repeated, same = fact_ndcg(["t1", "t1#again0", "t3"], grades, fact, 10)
    assert once == 1.0 and facts == 2 and same == 2
    assert repeated == (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))


def test_it_reports_every_figure(tmp_path: Path) -> None:
    report = run(
        str(small(tmp_path / "small")),
        None,
        k=3,
        seed=7,
        limit=None,
        embedding=HashEmbedding(),
        log=lambda message: None,
    )
    for store in ("plain_search", "restated_search"):
        assert set(report[store]) == {"collapse off", "collapse on"}
    on = report["restated_search"]["collapse on"]
    assert on["distinct_relevant_facts@3"] == 1.0 and on["ndcg@3"] > 0.9
    assert report["restated_write"]["found_share"] == 1.0
    assert report["plain_write"]["turns_flagged"] == 0
    assert "restatements found" in render(report)
