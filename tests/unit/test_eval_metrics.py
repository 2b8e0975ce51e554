"""The evaluation metrics against hand-computed cases, and the dataset loader's errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hybrid_memory_eval import (
    Dataset,
    Document,
    Query,
    Run,
    format_report,
    load_dataset,
    mrr_at_k,
    ndcg_at_k,
    parse_setting,
    parse_sweep,
    recall_at_k,
    score_run,
)

from hybrid_memory._model.errors import InvalidInputError

LOG2_3 = math.log2(3)  # the discount at rank 2
LOG2_4 = 2.0  # the discount at rank 3

# --- nDCG@k ---------------------------------------------------------------------------


def test_ndcg_single_relevant_at_rank_one_is_perfect() -> None:
    assert ndcg_at_k(["a", "b", "c"], {"a": 1}) == 1.0


def test_ndcg_single_relevant_at_rank_two() -> None:
    # DCG = (2^1 - 1) / log2(3); ideal = 1 / log2(2) = 1.
    assert ndcg_at_k(["x", "a"], {"a": 1}) == pytest.approx(1 / LOG2_3)
    assert ndcg_at_k(["x", "a"], {"a": 1}) == pytest.approx(0.6309298)


def test_ndcg_graded_judgments_use_exponential_gain() -> None:
    # Ranked b (grade 1), a (grade 2), x (unjudged):
    #   DCG   = (2^1-1)/log2(2) + (2^2-1)/log2(3) + 0 = 1 + 3/1.58496 = 2.892789
    #   ideal = (2^2-1)/log2(2) + (2^1-1)/log2(3)     = 3 + 1/1.58496 = 3.630930
    dcg = 1 + 3 / LOG2_3
    ideal = 3 + 1 / LOG2_3
    assert ndcg_at_k(["b", "a", "x"], {"a": 2, "b": 1}) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["b", "a", "x"], {"a": 2, "b": 1}) == pytest.approx(0.7967075)


def test_ndcg_ideal_counts_relevant_documents_that_were_not_retrieved() -> None:
    # Two relevant (grade 1), only one found, at rank 3: DCG = 1/log2(4) = 0.5;
    # ideal = 1 + 1/log2(3) = 1.630930.
    assert ndcg_at_k(["x", "y", "a"], {"a": 1, "b": 1}) == pytest.approx(0.5 / (1 + 1 / LOG2_3))


def test_ndcg_grade_zero_and_unjudged_give_no_gain() -> None:
    assert ndcg_at_k(["z", "a"], {"z": 0, "a": 1}) == pytest.approx(1 / LOG2_3)


def test_ndcg_cut_at_k() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert ndcg_at_k(ranked, {"a": 1}, k=10) == 0.0
    assert ndcg_at_k(ranked, {"a": 1}, k=11) == pytest.approx(1 / math.log2(12))


def test_ndcg_ideal_is_cut_at_k_too() -> None:
    qrels = {f"r{i}": 1 for i in range(12)}
    assert ndcg_at_k([f"r{i}" for i in range(10)], qrels, k=10) == pytest.approx(1.0)


def test_ndcg_without_relevant_documents_is_zero() -> None:
    assert ndcg_at_k(["a"], {}) == 0.0
    assert ndcg_at_k(["a"], {"a": 0}) == 0.0
    assert ndcg_at_k([], {"a": 1}) == 0.0


def test_a_repeated_id_counts_once_at_its_first_position() -> None:
    # ["x", "x", "a"] is ["x", "a"]: a at rank 2.
    assert ndcg_at_k(["x", "x", "a"], {"a": 1}, k=2) == pytest.approx(1 / LOG2_3)
    assert recall_at_k(["a", "a", "b"], {"a": 1, "b": 1}, k=2) == 1.0


def test_k_must_be_positive() -> None:
    with pytest.raises(InvalidInputError, match="k"):
        ndcg_at_k(["a"], {"a": 1}, k=0)


# --- Recall@k ---------------------------------------------------------------------------


def test_recall_counts_relevant_in_top_k() -> None:
    qrels = {"a": 1, "b": 2, "c": 1}
    ranked = ["a", "x", "y", "z", "w", "b"]
    assert recall_at_k(ranked, qrels, 5) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, qrels, 10) == pytest.approx(2 / 3)
    assert recall_at_k(["c", "b", "a"], qrels, 3) == 1.0


def test_recall_ignores_grade_zero() -> None:
    assert recall_at_k(["a"], {"a": 1, "z": 0}, 5) == 1.0
    assert recall_at_k(["z"], {"z": 0}, 5) == 0.0


# --- MRR@k ------------------------------------------------------------------------------


def test_mrr_is_reciprocal_rank_of_first_relevant() -> None:
    assert mrr_at_k(["x", "y", "a", "b"], {"a": 1, "b": 3}) == pytest.approx(1 / 3)
    assert mrr_at_k(["b"], {"a": 1, "b": 3}) == 1.0


def test_mrr_zero_when_nothing_relevant_in_top_k() -> None:
    assert mrr_at_k(["x", "y"], {"a": 1}) == 0.0
    assert mrr_at_k([f"x{i}" for i in range(10)] + ["a"], {"a": 1}, k=10) == 0.0
    assert mrr_at_k(["z", "a"], {"z": 0, "a": 1}) == 0.5


# --- scoring a run ------------------------------------------------------------------------


def _dataset(queries: list[Query], qrels: dict[str, dict[str, int]]) -> Dataset:
    return Dataset("toy", [Document("a", "alpha")], queries, qrels)


def test_score_run_averages_over_queries_and_breaks_down_by_category() -> None:
    queries = [
        Query("q1", "one", metadata={"category": 2}),
        Query("q2", "two", metadata={"category": 10}),
        Query("q3", "three", metadata={"category": 2}),
    ]
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = Run("toy", {"q1": ["a"], "q2": ["x", "b"], "q3": []}, [3.0, 1.0, 2.0])
    result = score_run(run, _dataset(queries, qrels))
    assert result["n_queries"] == 3
    assert result["ndcg@10"] == pytest.approx((1 + 1 / LOG2_3 + 0) / 3, abs=1e-4)
    assert result["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3, abs=1e-4)
    assert result["recall@5"] == pytest.approx(2 / 3, abs=1e-4)
    assert result["recall@10"] == pytest.approx(2 / 3, abs=1e-4)
    assert result["p50_ms"] == 2.0
    assert list(result["categories"]) == ["2", "10"]  # numeric order, not text order
    assert result["categories"]["2"]["n_queries"] == 2
    assert result["categories"]["2"]["ndcg@10"] == 0.5
    assert result["categories"]["10"]["mrr@10"] == 0.5


def test_score_run_without_categories_has_no_breakdown() -> None:
    run = Run("toy", {"q1": ["a"]}, [1.0])
    result = score_run(run, _dataset([Query("q1", "one")], {"q1": {"a": 1}}))
    assert "categories" not in result
    assert set(result) == {"ndcg@10", "recall@5", "recall@10", "mrr@10", "p50_ms", "n_queries"}


def test_format_report_shows_systems_categories_and_sweep() -> None:
    figures = {"ndcg@10": 0.5, "recall@5": 0.4, "recall@10": 0.6, "mrr@10": 0.7, "p50_ms": 3.0}
    report: dict[str, Any] = {
        "dataset": "toy",
        "n_memories": 3,
        "n_queries": 2,
        "k": 10,
        "settings": {"alpha": 0.5},
        **figures,
        "categories": {"1": {**figures, "n_queries": 2}},
        "peers": {"Peer": {**figures, "ndcg@10": 0.25, "categories": {}}},
        "sweep": [{"settings": {"alpha": 0.7}, **figures, "ndcg@10": 0.55}],
    }
    text = format_report(report)
    assert "hybrid-memory" in text and "Peer" in text
    assert "0.500" in text and "0.250" in text and "0.550" in text
    assert "alpha=0.5" in text


# --- command-line values ------------------------------------------------------------------


def test_parse_setting_reads_json_or_keeps_the_string() -> None:
    assert parse_setting("alpha=0.6") == ("alpha", 0.6)
    assert parse_setting("alpha=null") == ("alpha", None)
    assert parse_setting("alpha_values=[0.5,0.7,0.8]") == ("alpha_values", [0.5, 0.7, 0.8])
    assert parse_setting("keyword_tokenizer=porter unicode61") == (
        "keyword_tokenizer",
        "porter unicode61",
    )
    with pytest.raises(InvalidInputError, match="KEY=VALUE"):
        parse_setting("alpha")


def test_parse_sweep_splits_values_or_takes_a_json_list() -> None:
    assert parse_sweep("alpha=0.2,0.4,null") == ("alpha", [0.2, 0.4, None])
    assert parse_sweep("keyword_tokenizer=unicode61,porter") == (
        "keyword_tokenizer",
        ["unicode61", "porter"],
    )
    assert parse_sweep("alpha_values=[[0.5,0.7],[0.6,0.8]]") == (
        "alpha_values",
        [[0.5, 0.7], [0.6, 0.8]],
    )
    with pytest.raises(InvalidInputError, match="--sweep"):
        parse_sweep("alpha=")


# --- the dataset loader ---------------------------------------------------------------------


def _write(folder: Path, corpus: str, queries: str, qrels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (folder / "queries.jsonl").write_text(queries, encoding="utf-8")
    (folder / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return folder


def _lines(*objects: dict[str, Any]) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


GOOD_CORPUS = _lines(
    {
        "_id": "d1",
        "text": "Alice prefers dark mode",
        "tags": ["Alice"],
        "timestamp": "2023-05-08T13:56:00+00:00",
        "metadata": {"conversation": "c1", "session": 1},
    },
    {"_id": "d2", "text": "Bob likes hiking"},
)
GOOD_QUERIES = _lines(
    {
        "_id": "q1",
        "text": "which theme does Alice like?",
        "filter": {"conversation": "c1"},
        "now": "2023-10-23T09:55:00+00:00",
        "metadata": {"category": 2},
    },
    {"_id": "q2", "text": "who hikes?"},
    {"_id": "q3", "text": "unjudged query"},
)
GOOD_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n"


def test_load_dataset_reads_every_field(tmp_path: Path) -> None:
    dataset = load_dataset(_write(tmp_path / "toy", GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS))
    assert dataset.name == "toy"
    first = dataset.corpus[0]
    assert (first.id, first.text, first.tags) == ("d1", "Alice prefers dark mode", ("Alice",))
    assert first.metadata == {"conversation": "c1", "session": 1}
    assert first.timestamp == "2023-05-08T13:56:00+00:00"
    assert dataset.corpus[1].tags == () and dataset.corpus[1].timestamp is None
    q1 = dataset.queries[0]
    assert q1.filter == {"conversation": "c1"} and q1.now == "2023-10-23T09:55:00+00:00"
    assert q1.category == "2" and dataset.queries[1].category is None
    assert dataset.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}}
    # Only judged queries are scored; --limit keeps the first N of them.
    assert [q.id for q in dataset.judged_queries()] == ["q1", "q2"]
    assert [q.id for q in dataset.limited(1).judged_queries()] == ["q1"]


def test_blank_corpus_texts_load_but_are_not_storable(tmp_path: Path) -> None:
    # Cranfield has blank abstracts; a memory store refuses blank memories.
    corpus = GOOD_CORPUS + _lines({"_id": "d3", "text": ""}, {"_id": "d4", "text": "  "})
    dataset = load_dataset(_write(tmp_path, corpus, GOOD_QUERIES, GOOD_QRELS))
    assert len(dataset.corpus) == 4
    assert [d.id for d in dataset.storable()] == ["d1", "d2"]


def test_blank_lines_are_skipped_and_qrels_header_is_optional(tmp_path: Path) -> None:
    folder = _write(tmp_path, "\n" + GOOD_CORPUS + "\n", GOOD_QUERIES, "q1\td1\t1\n\n")
    assert len(load_dataset(folder).corpus) == 2


def _error(folder: Path) -> str:
    with pytest.raises(InvalidInputError) as info:
        load_dataset(folder)
    return str(info.value)


def test_missing_folder_is_named(tmp_path: Path) -> None:
    message = _error(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in message and "no such dataset folder" in message


def test_missing_file_is_named(tmp_path: Path) -> None:
    folder = _write(tmp_path, GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS)
    (folder / "queries.jsonl").unlink()
    message = _error(folder)
    assert str(folder / "queries.jsonl") in message and "missing" in message


@pytest.mark.parametrize(
    ("corpus", "line", "expected"),
    [
        (GOOD_CORPUS + "{not json\n", 3, "invalid JSON"),
        (GOOD_CORPUS + "[1, 2]\n", 3, "expected a JSON object"),
        ("\n" + _lines({"_id": "d1"}), 2, '"text" must be a string'),
        (_lines({"text": "no id"}), 1, '"_id" must be a non-empty string'),
        (GOOD_CORPUS + _lines({"_id": "d1", "text": "again"}), 3, "duplicate \"_id\" 'd1' (first"),
        (_lines({"_id": "d1", "text": "t", "tags": "Alice"}), 1, '"tags" must be a list'),
        (_lines({"_id": "d1", "text": "t", "metadata": [1]}), 1, '"metadata" must be a JSON'),
        (_lines({"_id": "d1", "text": "t", "timestamp": "May 8"}), 1, '"timestamp" must be'),
    ],
)
def test_malformed_corpus_line_is_named(
    tmp_path: Path, corpus: str, line: int, expected: str
) -> None:
    message = _error(_write(tmp_path, corpus, GOOD_QUERIES, GOOD_QRELS))
    assert f"corpus.jsonl:{line}:" in message
    assert expected in message


@pytest.mark.parametrize(
    ("queries", "line", "expected"),
    [
        (GOOD_QUERIES + _lines({"_id": "q9", "text": "t", "filter": "c1"}), 4, '"filter"'),
        (_lines({"_id": "q1", "text": "t", "now": 5}), 1, '"now" must be an ISO 8601'),
        (_lines({"_id": "q1", "text": ""}), 1, '"text" must be a non-empty string'),
    ],
)
def test_malformed_query_line_is_named(
    tmp_path: Path, queries: str, line: int, expected: str
) -> None:
    message = _error(_write(tmp_path, GOOD_CORPUS, queries, GOOD_QRELS))
    assert f"queries.jsonl:{line}:" in message
    assert expected in message


@pytest.mark.parametrize(
    ("qrels", "line", "expected"),
    [
        (GOOD_QRELS + "q2\td1\thigh\n", 4, "grade must be an integer"),
        (GOOD_QRELS + "q2 d1 1\n", 4, "expected query-id<TAB>corpus-id<TAB>grade"),
        (GOOD_QRELS + "q1\td1\t2\n", 4, "conflicting grades"),
    ],
)
def test_malformed_qrels_line_is_named(
    tmp_path: Path, qrels: str, line: int, expected: str
) -> None:
    message = _error(_write(tmp_path, GOOD_CORPUS, GOOD_QUERIES, qrels))
    assert f"qrels.tsv:{line}:" in message
    assert expected in message


def test_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    folder = _write(tmp_path, GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS)
    (folder / "corpus.jsonl").write_bytes(GOOD_CORPUS.encode() + b'{"_id": "d3", "text": "\xff"}\n')
    assert "corpus.jsonl:3: not UTF-8" in _error(folder)


def test_judgments_for_unknown_queries_are_refused(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS + "q7\td1\t1\n"))
    assert "qrels.tsv" in message and "'q7'" in message


def test_empty_inputs_are_refused(tmp_path: Path) -> None:
    assert "corpus is empty" in _error(_write(tmp_path / "a", "\n", GOOD_QUERIES, GOOD_QRELS))
    assert "no queries" in _error(_write(tmp_path / "b", GOOD_CORPUS, "", GOOD_QRELS))
    assert "no judgments" in _error(_write(tmp_path / "c", GOOD_CORPUS, GOOD_QUERIES, "h\tx\ty\n"))
    zero = "q1\td1\t0\n"
    assert "no query has a relevant" in _error(
        _write(tmp_path / "d", GOOD_CORPUS, GOOD_QUERIES, zero)
    )


def test_the_error_is_a_value_error_naming_file_and_line(tmp_path: Path) -> None:
    folder = _write(tmp_path, GOOD_CORPUS + "{\n", GOOD_QUERIES, GOOD_QRELS)
    with pytest.raises(ValueError) as info:
        load_dataset(folder)
    assert isinstance(info.value, InvalidInputError)
    assert info.value.field == f"{folder / 'corpus.jsonl'}:3"
