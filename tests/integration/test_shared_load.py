"""Many agents, one memory, under load (issue 16, item 2), the short form.

Runs ``benchmarks/shared_load.py`` (its worker code, unchanged) against the session's
real ``chroma run`` server: 4 processes x 2 threads adding and searching for
``HYBRID_MEMORY_LOAD_SECONDS`` (10) seconds, then every acknowledged memory checked
from every worker process and from a fresh one. Asserts the invariants, never timings
(the benchmark prints those).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.server, pytest.mark.load]
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "shared_load.py"
SECONDS = float(os.environ.get("HYBRID_MEMORY_LOAD_SECONDS", "10"))


def test_four_processes_sharing_a_server_lose_nothing(chroma_server: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
    }
    command = [sys.executable, str(SCRIPT), "--url", chroma_server, "--json"]
    command += ["--processes", "4", "--threads", "2", "--seconds", str(SECONDS)]
    # Each worker checks 50 memories by keyword and vector; the fresh process checks all.
    command += ["--sample", "50", "--fresh-sample", "0"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    report = json.loads(proc.stdout)

    ops = report["operations"]
    assert ops["adds"] > 0 and ops["searches"] > 0 and ops["memories"] >= ops["adds"]
    assert report["exceptions"]["other"] == {}, report["tracebacks"]
    assert report["memories_lost"] == 0
    assert report["own_write_misses"] == 0
    assert set(report["checks"]) == {f"process {i}" for i in range(4)} | {"fresh process"}
    for label, check in report["checks"].items():
        # the collection and the derived keyword index of every process hold exactly
        # the acknowledged memories; each checked one is found on both legs
        assert check["count"] == ops["memories"], label
        assert check["index_count"] == ops["memories"], label
        assert check["missing"] == check["wrong_text"] == 0, label
        assert check["checked"] > 0, label
        assert check["keyword_misses"] == check["vector_misses"] == 0, label
    assert report["checks"]["fresh process"]["checked"] == ops["memories"]
    assert report["failures"] == [] and proc.returncode == 0, report["failures"]
