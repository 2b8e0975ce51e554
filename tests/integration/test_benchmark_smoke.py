"""The speed benchmark runs end to end at a tiny size and reports every figure.

No timing is asserted: this only keeps ``benchmarks/scale.py`` from rotting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "scale.py"
DATA = REPO.parent / "shared" / "data"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (DATA / "locomo" / "corpus.jsonl").exists(),
        reason=f"evaluation data not found in {DATA}",
    ),
]

SYSTEM_KEYS = {
    "system",
    "label",
    "n",
    "ingest",
    "add_one_ms",
    "search_ms",
    "rss_mb",
    "searchable_after_add",
    "add_spacing",
    "count",
}


def test_benchmark_reports_every_figure_at_a_tiny_size() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--n",
            "300",
            "--queries",
            "20",
            "--adds",
            "3",
            "--peer-adds",
            "2",
            "--peers",
            "--json",
            "--data",
            str(DATA),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)

    assert {"benchmark", "date", "machine", "versions", "config", "results", "model"} <= set(report)
    (block,) = report["results"]
    assert block["n"] == 300
    assert {"data", "systems", "ratios", "targets"} <= set(block)
    assert set(block["systems"]) == {
        "ours-disk",
        "ours-memory",
        "chroma-disk",
        "chroma-memory",
        "langchain",
        "llamaindex",
    }
    for name, result in block["systems"].items():
        assert "error" not in result, (name, result)
        assert set(result) >= SYSTEM_KEYS, (name, sorted(result))
        adds = 2 if name in ("langchain", "llamaindex") else 3
        # A disk store's timed adds are spread over Chroma's write cycle of 1,000 records
        # by filler memories before each (332 = 1,000 // 3 - 1).
        spacing = 332 if name in ("ours-disk", "chroma-disk") else 0
        assert result["add_spacing"] == spacing, name
        assert result["count"] == 300 + adds * (1 + spacing), name
        assert result["ingest"]["rate_per_s"] > 0
        # The stores ingest in ten blocks of 30 (one turn each when paired); a peer's
        # BM25 retriever rebuilds on every add, so it takes them in one call.
        peer = name in ("langchain", "llamaindex")
        assert result["ingest"]["blocks"] == (1 if peer else 10), name
        assert result["search_ms"]["n"] == 20
        assert {"p50", "p95"} <= set(result["search_ms"])
        assert {"baseline", "peak", "growth"} <= set(result["rss_mb"])
    for name in ("ours-disk", "ours-memory"):
        searchable = block["systems"][name]["searchable_after_add"]
        # every added memory is searchable at once by the vector and the keyword leg
        assert searchable["vector"] == searchable["keyword"] == "3/3"
        assert "top10" in searchable
        assert "search_filtered_ms" in block["systems"][name]
    assert {
        "ours-disk/chroma-disk",
        "ours-memory/chroma-memory",
        "ours-disk/langchain",
        "ours-disk/llamaindex",
    } <= set(block["ratios"])
    assert {
        "search_p50_ms",
        "search_p95_ms",
        "add_one_p50_ms",
        "ingest_time_vs_chroma",
        "search_vs_langchain",
        "search_vs_llamaindex",
    } == set(block["targets"])
    for target in block["targets"].values():
        assert target["value"] is not None


def test_chroma_with_hybrid_memorys_metadata_layout_is_measured_on_request() -> None:
    """The Chroma baseline storing the records as hybrid-memory does (tags as one JSON
    string, both times): the part of the ingest gap that is Chroma storing more."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    command = [sys.executable, str(SCRIPT), "--n", "200", "--queries", "10", "--adds", "2"]
    command += ["--systems", "ours-disk", "chroma-disk-layout", "--json", "--data", str(DATA)]
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (block,) = json.loads(proc.stdout)["results"]
    layout = block["systems"]["chroma-disk-layout"]
    assert "error" not in layout, layout
    assert layout["count"] == 200 + 2 * 500  # each timed add after 499 fillers
    assert layout["ingest"]["rate_per_s"] > 0
    assert block["ratios"]["ours-disk/chroma-disk-layout"]["ingest_time"] > 0


def test_rounds_report_ingest_per_round_and_the_median_ratio() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    command = [sys.executable, str(SCRIPT), "--n", "200", "--queries", "10", "--adds", "2"]
    command += ["--systems", "chroma-disk", "ours-disk", "--rounds", "3", "--json"]
    command += ["--data", str(DATA)]
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["config"]["rounds"] == 3
    (block,) = report["results"]
    rounds = block["ingest_rounds"]
    assert rounds["rounds"] == 3
    assert set(rounds["engine_s"]) == {"chroma-disk", "ours-disk"}
    assert all(len(times) == 3 and min(times) > 0 for times in rounds["engine_s"].values())
    pair = rounds["ingest_time"]["ours-disk/chroma-disk"]
    ours, chroma = rounds["engine_s"]["ours-disk"], rounds["engine_s"]["chroma-disk"]
    assert pair["each"] == [
        pytest.approx(a / b, abs=1e-3) for a, b in zip(ours, chroma, strict=True)
    ]
    assert pair["median"] == pytest.approx(sorted(pair["each"])[1], abs=1e-3)
    target = block["targets"]["ingest_time_vs_chroma"]
    assert target["value"] == pair["median"] and "median of 3 rounds" in target["goal"]


def test_paired_workers_take_turns_and_report_every_round(tmp_path: Path) -> None:
    """``--paired``: both workers at once, one block at a time; every figure is there,
    for every round, and the peers are refused (they take other add counts). With
    ``--keep``, every round's stores are kept, to be profiled afterwards."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    command = [sys.executable, str(SCRIPT), "--n", "200", "--queries", "15", "--adds", "2"]
    command += ["--systems", "ours-disk", "chroma-disk", "--paired", "--rounds", "2"]
    command += ["--keep", str(tmp_path / "kept"), "--json", "--data", str(DATA)]
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["config"]["paired"] is True
    (block,) = report["results"]
    assert len(block["rounds"]) == 2
    for round_ in block["rounds"]:
        for name, result in round_["systems"].items():
            assert "error" not in result, (name, result)
            assert result["count"] == 200 + 2 * 500  # each timed add after 499 fillers
            assert result["ingest"]["blocks"] == 10  # ten turns of 20 memories
            assert result["search_ms"]["n"] == 15
            assert result["search_filtered_ms"]["n"] == 15
            assert result["missed_after_add"] == [], result["missed_after_add"]
        assert round_["ratios"]["ours-disk/chroma-disk"]["search_p50"] > 0
    kept = sorted(p.name for p in (tmp_path / "kept").iterdir())
    assert kept == ["chroma-disk-200", "chroma-disk-200-2", "ours-disk-200", "ours-disk-200-2"]
    store = tmp_path / "kept" / "ours-disk-200" / "store"
    assert (store / "chroma.sqlite3").is_file()
    # A kept store reopened by its owner: the first searches of its three most carried tags.
    opener = [sys.executable, str(SCRIPT.parent / "reopened_store.py"), str(store)]
    reopened = subprocess.run(
        [*opener, "--tags", "3", "--cases", "owner", "--settle", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert reopened.returncode == 0, reopened.stderr[-4000:]
    opened = json.loads(reopened.stdout)
    assert len(opened["tags"]) == 3, opened
    owner = opened["cases"]["owner"]
    assert "error" not in owner, owner
    assert len(owner["first_ms"]) == len(owner["again_ms"]) == 3, owner
    assert owner["open_s"] > 0 and owner["first_search_tag_matched"] is True, owner
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "--n", "200", "--paired", "--peers", "--data", str(DATA)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2 and "--paired" in refused.stderr
