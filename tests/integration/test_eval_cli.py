"""``hybrid-memory eval`` end to end on a tiny dataset folder written by each test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hybrid_memory_eval import evaluate, format_report, load_dataset
from hybrid_memory_eval.cli import main

from hybrid_memory import HybridMemorySettings
from tests.conftest import SHARED_DATA, HashEmbedding, write_collection

METRIC_KEYS = {"ndcg@10", "recall@5", "recall@10", "mrr@10", "p50_ms", "n_queries"}

# Two conversations; each query names one memory nearly verbatim, and a look-alike
# memory lives in the other conversation, so only a search that applies the
# query's filter to every leg is perfect.
CORPUS: list[dict[str, Any]] = [
    {
        "_id": "c1:1",
        "text": "I adopted a golden retriever puppy and named him Biscuit",
        "tags": ["Alice"],
        "timestamp": "2023-05-08T13:56:00+00:00",
        "metadata": {"conversation": "c1", "session": 1},
    },
    {
        "_id": "c1:2",
        "text": "I work night shifts as a nurse at the city hospital",
        "tags": ["Alice"],
        "timestamp": "2023-05-09T10:00:00+00:00",
        "metadata": {"conversation": "c1", "session": 1},
    },
    {
        "_id": "c1:3",
        "text": "I am training for the Berlin marathon in September",
        "tags": ["Bob"],
        "timestamp": "2023-06-01T08:30:00+00:00",
        "metadata": {"conversation": "c1", "session": 2},
    },
    {
        "_id": "c2:1",
        "text": "My neighbour adopted a golden retriever puppy named Biscuit too",
        "tags": ["Carol"],
        "timestamp": "2023-05-08T13:56:00+00:00",
        "metadata": {"conversation": "c2", "session": 1},
    },
    {
        "_id": "c2:2",
        "text": "I play the cello in a string quartet on weekends",
        "tags": ["Carol"],
        "timestamp": "2023-07-02T19:00:00+00:00",
        "metadata": {"conversation": "c2", "session": 1},
    },
]
QUERIES: list[dict[str, Any]] = [
    {
        "_id": "q1",
        "text": "golden retriever puppy named Biscuit",
        "filter": {"conversation": "c1"},
        "now": "2023-10-23T09:55:00+00:00",
        "metadata": {"category": 1},
    },
    {
        "_id": "q2",
        "text": "golden retriever puppy named Biscuit",
        "filter": {"conversation": "c2"},
        "now": "2023-10-23T09:55:00+00:00",
        "metadata": {"category": 1},
    },
    {
        "_id": "q3",
        "text": "nurse night shifts at the city hospital",
        "filter": {"conversation": "c1"},
        "metadata": {"category": 2},
    },
    {"_id": "q4", "text": "cello string quartet", "metadata": {"category": 2}},
]
QRELS = {"q1": "c1:1", "q2": "c2:1", "q3": "c1:2", "q4": "c2:2"}


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write_collection(tmp_path / "toy", CORPUS, QUERIES, QRELS)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["eval", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# --- the real default model through the command line ------------------------------------


@pytest.mark.slow
def test_json_report_of_a_perfect_retrieval_scores_one(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _run(capsys, str(toy), "--json")
    assert status == 0, err
    report = json.loads(out)
    assert set(report) >= METRIC_KEYS
    assert report["n_queries"] == 4
    for key in ("ndcg@10", "recall@5", "recall@10", "mrr@10"):
        assert report[key] == 1.0, (key, report)
    assert report["p50_ms"] > 0
    assert set(report["categories"]) == {"1", "2"}
    assert report["categories"]["1"]["n_queries"] == 2
    # Progress went to stderr, not into the JSON.
    assert "ingest: 5/5" in err and "queries (hybrid-memory): 4/4" in err


@pytest.mark.slow
def test_text_report_with_a_sweep_and_settings(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _run(
        capsys, str(toy), "--set", "tag_weight=0.2", "--sweep", "alpha=0.3,0.7", "--limit", "2"
    )
    assert status == 0, err
    assert "hybrid-memory" in out and "ndcg@10" in out
    assert "tag_weight=0.2" in out
    assert "sweep (" in out and "(base)" in out
    sweep_lines = [line for line in out.splitlines() if line.startswith(("0.3", "0.7"))]
    assert len(sweep_lines) == 2
    assert "2 queries" in out


@pytest.mark.slow
def test_python_dash_m_entry_point(toy: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.run(
        [sys.executable, "-m", "hybrid_memory", "eval", str(toy), "--json", "--quiet", "--k", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {"ndcg@3", "recall@5", "recall@3", "mrr@3", "p50_ms", "n_queries"} <= set(report)
    assert report["ndcg@3"] == 1.0
    assert proc.stderr.strip() == "" or "ingest" not in proc.stderr


# --- failures are reported, not raised ---------------------------------------------------


def test_malformed_dataset_names_file_and_line(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (toy / "queries.jsonl").open("a") as handle:
        handle.write('{"_id": "q5", "text": }\n')
    status, out, err = _run(capsys, str(toy), "--json")
    assert status == 2
    assert out == ""
    assert f"{toy / 'queries.jsonl'}:5: invalid JSON" in err


def test_missing_folder_and_bad_arguments_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toy: Path
) -> None:
    status, _, err = _run(capsys, str(tmp_path / "absent"))
    assert status == 2 and "no such dataset folder" in err
    status, _, err = _run(capsys, str(toy), "--set", "no_such_setting=1")
    assert status == 2 and "no_such_setting" in err
    status, _, err = _run(capsys, str(toy), "--sweep", "alpha")
    assert status == 2 and "--sweep" in err
    status, _, err = _run(capsys, str(toy), "--k", "0")
    assert status == 2 and "--k" in err


# --- the runner with a cheap embedding: sweeps reuse or rebuild the store ---------------


class CountingEmbedding(HashEmbedding):
    """The hashed embedding with separate document and query methods, counting documents."""

    def __init__(self) -> None:
        super().__init__()
        self.documents = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += len(texts)
        return self(texts)

    def embed_query(self, text: str) -> list[float]:
        return self([text])[0]


def test_sweep_reuses_the_store_for_search_settings_and_rebuilds_for_ingest_ones(
    toy: Path,
) -> None:
    embedding = CountingEmbedding()
    report = evaluate(
        load_dataset(toy),
        embedding=embedding,
        sweeps=[("alpha", [0.0, 0.5, 1.0]), ("keyword_tokenizer", ["unicode61"])],
    )
    assert [row["settings"] for row in report["sweep"]] == [
        {"alpha": 0.0},
        {"alpha": 0.5},
        {"alpha": 1.0},
        {"keyword_tokenizer": "unicode61"},
    ]
    for row in report["sweep"]:
        assert set(row) >= METRIC_KEYS
    # The corpus was embedded twice: once for the base and every alpha, once for the
    # tokenizer point, which needs a store of its own.
    assert embedding.documents == 2 * len(CORPUS)


def test_grid_sweeps_every_combination(toy: Path, hash_embedding: HashEmbedding) -> None:
    report = evaluate(
        load_dataset(toy),
        embedding=hash_embedding,
        sweeps=[("alpha", [0.2, 0.8]), ("tag_weight", [0.0, 0.5])],
        grid=True,
    )
    assert [row["settings"] for row in report["sweep"]] == [
        {"alpha": 0.2, "tag_weight": 0.0},
        {"alpha": 0.2, "tag_weight": 0.5},
        {"alpha": 0.8, "tag_weight": 0.0},
        {"alpha": 0.8, "tag_weight": 0.5},
    ]


def test_an_invalid_sweep_value_is_an_error_not_a_rebuild(
    toy: Path, hash_embedding: HashEmbedding
) -> None:
    from hybrid_memory._model.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="alpha"):
        evaluate(load_dataset(toy), embedding=hash_embedding, sweeps=[("alpha", [2.0])])


# --- the shared data, when present ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED_DATA / "cranfield" / "corpus.jsonl").exists(),
    reason=f"evaluation data not found in {SHARED_DATA}",
)
def test_shared_datasets_load() -> None:
    for name, memories, queries in (("locomo", 2760, 760), ("cranfield", 1400, 225)):
        dataset = load_dataset(SHARED_DATA / name)
        assert len(dataset.corpus) == memories
        assert len(dataset.judged_queries()) == queries


# --- breakdowns, significance and run files -------------------------------------------------


def test_by_field_groups_every_system_and_sweeps_carry_p_values(
    toy: Path, hash_embedding: HashEmbedding
) -> None:
    report = evaluate(
        load_dataset(toy),
        embedding=hash_embedding,
        by="filter.conversation",
        sweeps=[("alpha", [0.0, 1.0])],
    )
    assert report["by"] == "filter.conversation"
    # q4 has no filter: it is its own group, "(none)".
    assert {name: g["n_queries"] for name, g in report["groups"].items()} == {
        "(none)": 1,
        "c1": 2,
        "c2": 1,
    }
    for group in report["groups"].values():
        assert "p_value" not in group  # the reference run is not compared with itself
    for row in report["sweep"]:
        assert 0 < row["p_value"] <= 1
        assert set(row["groups"]) == set(report["groups"])
        for group in row["groups"].values():
            assert 0 < group["p_value"] <= 1 and "ids" not in group
    assert report["significance"]["metric"] == "ndcg@10"
    text = format_report(report)
    assert "filter.conversation = c1 (2 queries):" in text
    assert 'sweep {"alpha": 0.0}' in text


def test_a_sweep_point_equal_to_the_defaults_has_p_one(
    toy: Path, hash_embedding: HashEmbedding
) -> None:
    default_alpha = HybridMemorySettings().alpha
    report = evaluate(
        load_dataset(toy), embedding=hash_embedding, sweeps=[("alpha", [default_alpha])]
    )
    assert report["sweep"][0]["p_value"] == 1.0


def test_an_unknown_by_field_fails_before_the_run(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _run(capsys, str(toy), "--by", "metadata.nothing_here")
    assert status == 2 and out == ""
    assert "--by" in err and "metadata.nothing_here" in err and "ingest" not in err
    status, _, err = _run(capsys, str(toy), "--by", "colour")
    assert status == 2 and "metadata" in err


def test_run_files_are_trec_runs_that_trec_eval_scores_as_the_report_does(
    toy: Path, hash_embedding: HashEmbedding, tmp_path: Path
) -> None:
    import ir_measures
    from ir_measures import nDCG

    target = tmp_path / "runs" / "toy.trec"
    target.parent.mkdir()
    report = evaluate(
        load_dataset(toy),
        embedding=hash_embedding,
        sweeps=[("alpha", [0.0])],
        run_file=target,
    )
    files = report["run_files"]
    assert files["hybrid-memory"] == str(target)
    assert files["sweep alpha=0.0"] == str(tmp_path / "runs" / "toy.sweep-alpha=0.0.trec")
    qrels = [ir_measures.Qrel(query, doc, 1) for query, doc in QRELS.items()]
    for label, path in files.items():
        lines = Path(path).read_text().splitlines()
        fields = [line.split() for line in lines]
        assert all(len(f) == 6 and f[1] == "Q0" for f in fields)
        assert {f[5] for f in fields} == {label.replace(" ", "-")}
        run = list(ir_measures.read_trec_run(path))
        measured = ir_measures.calc_aggregate([nDCG @ 10], qrels, run)[nDCG @ 10]
        expected = report if label == "hybrid-memory" else report["sweep"][0]
        # trec_eval averages over the queries the run answers: all four here.
        assert measured == pytest.approx(expected["ndcg@10"], abs=1e-4), label


@pytest.mark.slow
def test_cli_by_and_run_with_peers(
    toy: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_PEER_VENVS", str(tmp_path / "no-venvs"))
    target = tmp_path / "toy.trec"
    argv = ["--peers", "--by", "metadata.category", "--run", str(target), "--quiet"]
    status, out, err = _run(capsys, str(toy), "--json", *argv)
    assert status == 0, err
    report = json.loads(out)
    ran = [name for name, res in report["peers"].items() if "not_run" not in res]
    assert len(ran) == 3
    for name in ran:
        figures = report["peers"][name]
        assert 0 < figures["p_value"] <= 1
        assert set(figures["groups"]) == {"1", "2"}
        assert all(0 < g["p_value"] <= 1 for g in figures["groups"].values())
        assert Path(report["run_files"][name]).is_file()
    assert set(report["run_files"]) == {"hybrid-memory", *ran}
    status, out, err = _run(capsys, str(toy), *argv)
    assert status == 0, err
    assert "p (ndcg@10)" in out and "metadata.category = 1 (2 queries):" in out
