"""hybrid_memory._process.heap: free heap pages handed back after bulk writes only."""

from __future__ import annotations

import sys

import pytest

from hybrid_memory._process import heap as _heap


def test_small_writes_never_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def trim(pad: int) -> int:
        calls.append(pad)
        return 1

    monkeypatch.setattr(_heap, "_trim", trim)
    assert not _heap.release_after_write(1)
    assert not _heap.release_after_write(_heap.TRIM_FROM_MEMORIES - 1)
    assert calls == []
    assert _heap.release_after_write(_heap.TRIM_FROM_MEMORIES)
    assert calls == [0]


def test_no_trim_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_heap, "_trim", None)
    assert not _heap.available()
    assert not _heap.release_after_write(10**6)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_runs_here() -> None:
    # This project's machines run glibc: the real call is made and returns.
    assert _heap.available()
    assert _heap.release_after_write(10**6)
