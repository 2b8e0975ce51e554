"""The soak benchmark's short form (issue 21): 3 processes x 2 threads adding, searching,
updating and deleting on one embedded path and on one ``chroma run`` server, one process
(the path's owner) killed with SIGKILL half-way. Runs ``benchmarks/soak.py`` unchanged and
asserts its invariants, never timings: nothing acknowledged lost, every live memory found
by keyword and by vector from every process, equal counts, no foreign error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.load, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "soak.py"
SECONDS = float(os.environ.get("HYBRID_MEMORY_LOAD_SECONDS", "6"))


def test_soak_with_a_killed_process_loses_nothing() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "ANONYMIZED_TELEMETRY": "False",
    }
    command = [sys.executable, str(SCRIPT), "--json", "--kill", "--seconds", str(SECONDS)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    reports = json.loads(proc.stdout)
    assert [r["store"] for r in reports] == ["embedded", "server"]
    for report in reports:
        assert report["operations"] > 0
        assert report["killed"] is not None
        assert report["foreign_errors"] == {}, report["tracebacks"]
        assert report["lost"] == 0, report["checks"]
        assert len(report["checks"]) == 3  # two survivors and a fresh process
        counts = {check["count"] for check in report["checks"].values()}
        assert len(counts) == 1, report["checks"]
        for label, check in report["checks"].items():
            assert check["keyword_misses"] == check["vector_misses"] == 0, (label, check)
            assert check["index_count"] == check["count"], label
        assert report["failures"] == [], report["failures"]
    assert proc.returncode == 0
