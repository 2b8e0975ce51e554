"""The ring of turns behind ``benchmarks/scale.py --paired`` (``benchmarks/_scale/turns.py``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from benchmarks._scale.turns import Turns, make_ring


def test_workers_take_strict_turns_around_the_ring(tmp_path: Path) -> None:
    make_ring(tmp_path, 3)
    order: list[int] = []
    failures: list[BaseException] = []

    def worker(position: int) -> None:
        turns = Turns(tmp_path, position, 3, timeout=20)
        try:
            for _ in range(4):
                with turns.turn():
                    order.append(position)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
        finally:
            turns.close()

    threads = [threading.Thread(target=worker, args=(p,)) for p in (2, 1, 0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failures
    assert order == [0, 1, 2] * 4


def test_a_turn_that_never_comes_times_out(tmp_path: Path) -> None:
    make_ring(tmp_path, 2)
    second = Turns(tmp_path, 1, 2, timeout=0.2)  # worker 0 never runs: no baton
    try:
        with pytest.raises(TimeoutError, match="no turn came"), second.turn():
            pass
    finally:
        second.close()


def test_a_position_outside_the_ring_is_refused(tmp_path: Path) -> None:
    make_ring(tmp_path, 2)
    with pytest.raises(ValueError, match="position 2 is not in a ring of 2"):
        Turns(tmp_path, 2, 2)
