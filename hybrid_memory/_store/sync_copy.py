"""Copying the collection's records into the keyword index a page at a time, and what a
read of them saw (:class:`Counted`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.records import IndexRow
from hybrid_memory._store.collection import PAGE

log = logging.getLogger("hybrid_memory")


class Counted:
    """Pages of the collection's records, counted as they are read: :attr:`whole` when
    they came in one page that was not full (one read saw them all, at one moment)."""

    def __init__(self, pages: Iterator[list[IndexRow]], *, ids: bool = False) -> None:
        self._pages = pages
        self.read = 0
        self.last = 0
        self._keep_ids = ids
        self.ids: set[str] = set()  # of every record read, when ``ids``

    def __iter__(self) -> Iterator[list[IndexRow]]:
        return self

    def __next__(self) -> list[IndexRow]:
        page = next(self._pages)
        self.read += 1
        self.last = len(page)
        if self._keep_ids:
            self.ids.update(row.id for row in page)
        return page

    @property
    def whole(self) -> bool:
        return self.read <= 1 and self.last < PAGE


def copy_all(
    index: KeywordIndex, pages: Iterator[list[IndexRow]], *, changed_only: bool = False
) -> int:
    """Copy the collection's records into the index a page at a time, each page read
    inside the index's write transaction (:meth:`KeywordIndex.copy_in`): how many.
    ``changed_only``: only those whose ``updated_at`` differs from the index's (or that
    it lacks)."""
    copied = 0
    read = lambda: next(pages, None)  # noqa: E731
    while (page_copied := index.copy_in(read, changed_only=changed_only)) is not None:
        copied += page_copied
    return copied


def log_failure(future: Future[None]) -> None:
    """A background reconcile that failed (the server unreachable, say): the periodic
    check tries again; nothing to raise to."""
    if not future.cancelled() and future.exception() is not None:
        log.debug("background reconcile failed: %s", future.exception())
