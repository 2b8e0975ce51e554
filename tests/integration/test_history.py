"""Checked histories (issue 45), the short form: processes x threads add, update, delete
and search one embedded path and one Chroma server while a process is killed (kill -9),
the owner of the path is stopped (SIGSTOP, then SIGCONT) and the server restarts; every
call and return is recorded with what it saw, and the whole history is checked
(``benchmarks/history_check.py``: nothing acknowledged lost, nothing deleted back, own
writes seen at once and others' within the sync bound, namespaces apart, every memory on
both legs at the end). ``HYBRID_MEMORY_HISTORY_SECONDS`` lengthens it; the benchmark runs
the long form (60 s per store kind).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks import history_check

SECONDS = os.environ.get("HYBRID_MEMORY_HISTORY_SECONDS", "8")


@pytest.mark.fault
@pytest.mark.server
@pytest.mark.parametrize("kind", ["embedded", "server"])
def test_a_checked_history_under_faults_has_no_anomalies(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ["--stores", kind, "--seconds", SECONDS, "--processes", "3", "--threads", "2"]
    status = history_check.main([*options, "--scratch", str(tmp_path)])
    report = capsys.readouterr().out
    assert status == 0, report
    assert ", 0 anomalies" in report, report
    checked = int(report.rsplit(" operations checked", 1)[0].rsplit("\n", 1)[-1])
    assert checked > 50, report  # the run did work: a history of a few calls checks little
