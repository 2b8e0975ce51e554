"""Checked histories (issue 45), the short form: processes x threads add, update, delete
and search one embedded path and one Chroma server while a process is killed (kill -9),
the owner of the path is stopped (SIGSTOP, then SIGCONT) and the server restarts; every
call and return is recorded with what it saw, and the whole history is checked
(``benchmarks/history_check.py``: nothing acknowledged lost, nothing deleted back, own
writes seen at once and others' within the sync bound, namespaces apart, every memory on
both legs at the end). ``HYBRID_MEMORY_HISTORY_SECONDS`` lengthens it; the benchmark runs
the long form (60 s per store kind).

Every kind of anomaly is checked strictly on both store kinds, "others' write stale"
included: the checker found that on a server store another process's update could stay
unseen past the sync bound (a catch-up from the newest ``updated_at`` indexed missed an
update stamped earlier but committed later); the catch-up now reads again the window a
write may commit late in (``hybrid_memory/_store/sync.py``), and
``tests/integration/test_late_commits.py`` plays that interleaving deterministically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks import history_check

SECONDS = os.environ.get("HYBRID_MEMORY_HISTORY_SECONDS", "8")


def checked_history(kind: str, scratch: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    options = ["--stores", kind, "--seconds", SECONDS, "--processes", "3", "--threads", "2"]
    history_check.main([*options, "--scratch", str(scratch), "--json"])
    (report,) = json.loads(capsys.readouterr().out)
    assert report["operations"] > 50, report  # the run did work
    assert report["hung"] == [], report
    return report


@pytest.mark.fault
@pytest.mark.server
@pytest.mark.parametrize("kind", ["embedded", "server"])
def test_a_checked_history_under_faults_has_no_anomalies(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = checked_history(kind, tmp_path, capsys)
    found = {k: n for k, n in report["anomalies"].items() if n}
    assert found == {}, report["examples"]
