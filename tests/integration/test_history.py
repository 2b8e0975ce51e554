"""Checked histories (issue 45), the short form: processes x threads add, update, delete
and search one embedded path and one Chroma server while a process is killed (kill -9),
the owner of the path is stopped (SIGSTOP, then SIGCONT) and the server restarts; every
call and return is recorded with what it saw, and the whole history is checked
(``benchmarks/history_check.py``: nothing acknowledged lost, nothing deleted back, own
writes seen at once and others' within the sync bound, namespaces apart, every memory on
both legs at the end). ``HYBRID_MEMORY_HISTORY_SECONDS`` lengthens it; the benchmark runs
the long form (60 s per store kind).

One kind of anomaly is a known gap, found by this checker and kept visible in its own
test: on a server store, another process's *update* of a memory can stay unseen by a
process's keyword index well past the sync bound. Each process catches up from its
index's watermark (the newest ``updated_at`` it holds), and its own writes move that
watermark past an update another process stamped earlier but committed later; an update
changes no count, so nothing else brings it in (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks import history_check

SECONDS = os.environ.get("HYBRID_MEMORY_HISTORY_SECONDS", "8")
KNOWN_GAP = "others' write stale"


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
    found = {k: n for k, n in report["anomalies"].items() if n and k != KNOWN_GAP}
    assert found == {}, report["examples"]
    if kind == "embedded":  # one shared index file: the gap cannot arise there
        assert report["anomalies"].get(KNOWN_GAP, 0) == 0, report["examples"]


@pytest.mark.fault
@pytest.mark.server
@pytest.mark.xfail(reason="known gap: a server store's catch-up misses late updates", strict=False)
def test_a_server_store_shows_other_processes_updates_within_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = checked_history("server", tmp_path, capsys)
    assert report["anomalies"].get(KNOWN_GAP, 0) == 0, report["examples"][KNOWN_GAP]
