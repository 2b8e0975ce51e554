"""Every in-memory copy of the keyword index's rows, with one owner.

The index file is derived from the collection; these are derived from the file: the
counts kept between writes (:class:`~hybrid_memory._keyword.reads.IndexReads`), the rows
named by memory id and back (:class:`~hybrid_memory._keyword.memory_ids.MemoryIds`), the BM25
postings (:class:`~hybrid_memory._keyword.bm25.KeywordSearch` and its keeper), and the tags'
carriers (:class:`~hybrid_memory._keyword.tag_index.TagIndex`). :class:`Mirrors` makes
them together over a (re)opened file, brings them in step together with every write
(this connection's, and other connections' seen through ``PRAGMA data_version``), and
lets them go together, so that no part is left behind the others.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence

from hybrid_memory._keyword.bm25 import KeywordSearch
from hybrid_memory._keyword.file import IndexFile
from hybrid_memory._keyword.memory_ids import MemoryIds
from hybrid_memory._keyword.reads import IndexReads
from hybrid_memory._keyword.tag_index import TagIndex
from hybrid_memory._keyword.writes import Batch


class _View(threading.local):
    """Whether this thread is inside :meth:`Mirrors.one_view`."""

    open = False


class Mirrors:
    """The in-memory parts over one open index file. Every method runs under the
    index's lock."""

    def __init__(self, file: IndexFile) -> None:
        conn = file.conn
        self._file = file
        self.reads = IndexReads(conn)
        self.ids = MemoryIds(conn, lambda: self.keywords.postings)
        self.tags = TagIndex(conn, self.ids, empty=file.opened_empty)
        self.keywords = KeywordSearch(
            conn,
            file.tokenizer,
            self.reads,
            self.ids,
            empty=file.opened_empty,
            path=file.path,
            beside=self.tags,  # a reopened file's carriers come with its postings
        )
        self._data_version = file.data_version()
        self._view = _View()

    def written(self, batch: Batch, tokens: str | None) -> None:
        """A write's commit (its rows' ``tokens`` for the postings) taken in."""
        self.keywords.keeper.written(batch, tokens)
        self.ids.written(r.id for r in batch.rows)
        self.tags.written(batch)

    def deleting(self, rowids: Sequence[int]) -> None:
        """Rows deleted in the open transaction (the postings let them go at once)."""
        self.keywords.keeper.deleted(rowids)

    def delete_failed(self) -> None:
        """A delete rolled back after :meth:`deleting`: the postings are built again."""
        self.keywords.postings = None

    def removed(self, found: Mapping[str, int], rowids: list[int]) -> None:
        """A delete's commit: the rows let go."""
        self.ids.written(found)
        self.tags.removed(rowids)

    def cleared(self) -> None:
        """Every row deleted: every part empty, as the file."""
        self.reads.clear_counts()
        self.keywords.keeper.cleared()
        self.tags.carriers.clear()
        self.ids.clear_rowids()

    def catch_up(self) -> None:
        """In step with rows other connections wrote (another process sharing this
        index file), when the file says any were."""
        version = self._file.data_version()
        if version == self._data_version:
            return
        self._data_version = version
        self.reads.clear_counts()
        self.ids.clear_rowids()
        seen = self.keywords.keeper.other_writers_wrote()
        if seen is None:
            self.tags.carriers.clear()  # read again when next asked for
        else:
            self.tags.other_writers_wrote(*seen)

    def catch_up_unless_viewing(self) -> None:
        """:meth:`catch_up`, unless this thread is inside :meth:`one_view`, which did it
        at its start."""
        if not self._view.open:
            self.catch_up()

    @contextlib.contextmanager
    def one_view(self, lock: threading.RLock) -> Iterator[None]:
        """The reads of the body (one search, in this thread) see other connections'
        writes as of its start: looking for them (a PRAGMA, ~30 us) is done once, not in
        each of a search's seven or so calls. This connection's own writes show at once."""
        view = self._view
        if view.open:
            yield
            return
        with lock:
            self.catch_up()
        view.open = True
        try:
            yield
        finally:
            view.open = False
