"""What the keyword leg's two rankings (:mod:`~hybrid_memory._keyword.numpy_top` and
:mod:`~hybrid_memory._keyword.compiled_top`) read of
:class:`~hybrid_memory._keyword.postings.Postings`, named here so that the rankings need
not import the postings that call them; and the totals the compiled loops keep between
searches."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword.postings_file import TermLists


class Scratch:
    """The loops' totals, kept between searches, all zeros between them (each search
    clears the rows it scored), so that no search allocates a store-long array."""

    def __init__(self) -> None:
        self.totals = np.zeros(0, dtype=np.float64)  # one per row id, for scores and within
        self.dirty = False  # a search was cut short before clearing
        self.block = np.zeros(0, dtype=np.float64)  # best_rows' block of totals


class RankedPostings(Protocol):
    """The postings as a ranking reads them: each term's lists, the rows' lengths and
    live mask, and the compiled loops' kept totals."""

    high: int
    scratch: Scratch

    def parts(self, term: str) -> list[TermLists]: ...

    def live_rows(self, term: str) -> npt.NDArray[np.int32]: ...

    def __len__(self) -> int: ...

    @property
    def live(self) -> npt.NDArray[np.bool_]: ...

    @property
    def length(self) -> npt.NDArray[np.float32]: ...

    @property
    def dead(self) -> int: ...

    def avgdl(self) -> float: ...
