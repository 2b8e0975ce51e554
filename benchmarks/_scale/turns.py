"""Turns: the workers of a ``--paired`` run take turns, block by block.

This machine changes speed by a third and more over minutes (other work on its host):
measured one after the other, a system that met a slow minute lost to one that met a
fast one, and a ratio moved by 0.3 to 2 between runs of the same code. Paired, every
worker runs at once but works only while it holds the baton: it ingests, adds, searches
and searches filtered in small blocks (10,000 memories of the ingest, ten questions),
handing the baton on after each,
so the systems meet the same minutes and never share the cores.

The baton is one byte passed around a ring of named pipes (``turn-<i>``): worker ``i``
waits for it on its own pipe and hands it to ``i + 1``; worker 0 holds it first. Every
worker must run the same number of blocks (the same data and counts), or the ring
stops: a wait gives up after ``timeout`` seconds with an error instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Iterator
from pathlib import Path


def make_ring(folder: Path, count: int) -> None:
    """The ring's pipes, one per worker, in ``folder``."""
    for position in range(count):
        os.mkfifo(folder / f"turn-{position}")


class Turns:
    """One worker's place in the ring: ``with turns.turn(): ...`` runs a block."""

    def __init__(self, folder: Path, position: int, count: int, timeout: float = 3600.0) -> None:
        if not 0 <= position < count:
            raise ValueError(f"position {position} is not in a ring of {count}")
        # Read and write ends opened together (O_RDWR), so that opening never blocks and
        # a write never meets a pipe without a reader.
        self._own = os.open(folder / f"turn-{position}", os.O_RDWR)
        self._next = os.open(folder / f"turn-{(position + 1) % count}", os.O_RDWR)
        self._held = position == 0
        self._timeout = timeout

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        if not self._held:
            ready, _, _ = select.select([self._own], [], [], self._timeout)
            if not ready:
                raise TimeoutError(f"no turn came within {self._timeout:.0f} s")
            os.read(self._own, 1)
        self._held = True
        try:
            yield
        finally:
            self._held = False
            os.write(self._next, b"t")

    def close(self) -> None:
        os.close(self._own)
        os.close(self._next)


class Alone:
    """Not paired: every block runs at once."""

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        yield
