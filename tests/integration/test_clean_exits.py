"""Clean exits (issue 45): short processes on a server store and on an embedded path all
exit with status 0. They used to die at interpreter exit with SIGABRT ("terminate called
without an active exception") when a daemon thread of the store was inside numpy's C++
code as the interpreter finalized (see ``hybrid_memory/_process/exit.py``).

A short form runs here (``HYBRID_MEMORY_EXIT_COUNT``, default 12 per store kind);
``python benchmarks/clean_exits.py`` runs 60 of each.
"""

from __future__ import annotations

import os

import pytest

from benchmarks import clean_exits

COUNT = int(os.environ.get("HYBRID_MEMORY_EXIT_COUNT", "12"))


@pytest.mark.load
@pytest.mark.server
@pytest.mark.parametrize("kind", ["server", "embedded"])
def test_short_processes_all_exit_with_status_zero(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = clean_exits.main(["--count", str(COUNT), "--stores", kind, "--timeout", "180"])
    report = capsys.readouterr().out
    assert status == 0, report
    assert f"{COUNT}/{COUNT} exited 0" in report
