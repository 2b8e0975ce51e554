"""Smoke test of ``benchmarks/scale.py --namespaces`` (issue 44): every system reports
every figure at a tiny size, under a descriptor limit. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "scale.py"


def test_many_tenants_benchmark_reports_every_figure() -> None:
    command = [sys.executable, str(SCRIPT), "--namespaces", "12", "--per", "3"]
    command += ["--searches", "5", "--ulimit", "1024", "--json"]
    command += ["--systems", "ours", "chroma", "ours-one", "chroma-one"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)["namespaces"]
    assert [r["system"] for r in results] == ["ours", "chroma", "ours-one", "chroma-one"]
    for r in results:
        assert "error" not in r, r
        assert r["created"] == 12 and r["ulimit_n"] == 1024
        assert r["create_ms"]["n"] == 12 and r["search_ms"]["n"] == 5
        assert r["search_wrong_tenant"] == 0
        assert 0 < r["fds_after_search"] < 1024
        assert r["disk_mb"] > 0 and r["files"] > 0 and r["peak_rss_mb"] > 0
