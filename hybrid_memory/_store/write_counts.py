"""Who wrote to a store since a moment, as this process can tell without asking Chroma.

A store's sync skips reading the collection (a count and a filtered read, which grow with
the collection) while nobody else wrote to it. Three witnesses tell, each where it can:

- :meth:`WriteCounts.file_version`: SQLite's ``PRAGMA data_version`` of an embedded
  store's ``chroma.sqlite3``, read on a connection that never writes. It changes whenever
  anyone commits to the file (the owner of the path commits every process's writes):
  two equal readings mean nobody wrote in between.
- :meth:`WriteCounts.begun_by_others`: how many writes anyone but this store began on the
  path, when this process owns the path (it runs the other processes' writes, so it
  counts them all: :mod:`hybrid_memory._shared_path.ownership`).
- :meth:`WriteCounts.begun_on_share`: how many writes that can touch a namespace's share
  began, by anyone (the owner's ledger, :mod:`hybrid_memory._shared_path.write_ledger`);
  writes to other namespaces leave it alone. Compared with
  :attr:`WriteCounts.own_record_writes`, it tells whether every write was this store's.

Each answers None where it cannot tell (a server, a client the caller made, an in-memory
store, a process that does not own the path): the caller then reads the collection.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from hybrid_memory._shared_path.ownership import PathOwnership
from hybrid_memory._shared_path.server import WRITE_OPERATIONS
from hybrid_memory._shared_path.write_ledger import collection_key

CHROMA_FILE = "chroma.sqlite3"
# What a write of collection metadata only touches, for the ledger: no record.
_METADATA_ONLY = "metadata-only"


class WriteCounts:
    """The writes of one collection object (a store's, or a namespace's share) and the
    witnesses of everyone else's (see the module).

    ``ownership``: this object's own share of an embedded path (None elsewhere);
    ``counter``: whoever counts its writes on the path (its ownership, or a namespace's
    store's); ``chroma_name``: the Chroma collection it writes to; ``share``: a
    namespace's key in it (None for a store's own collection)."""

    def __init__(
        self,
        *,
        ownership: PathOwnership | None,
        counter: PathOwnership | None,
        chroma_name: str,
        share: str | None,
    ) -> None:
        self.counter = counter
        self._ownership = ownership
        self._share = share
        self._collection = collection_key(chroma_name)
        # What this object's writes can touch, for the owner's ledger of writes.
        self._touching = share if share is not None else self._collection
        self._file = ChromaFileVersion(ownership.path) if ownership is not None else None
        self._own_writes = 0  # every write this object made on the path
        #: How many writes of records (not of collection metadata) this object made on
        #: the path: those :meth:`begun_on_share` counts.
        self.own_record_writes = 0

    @contextlib.contextmanager
    def counting(self, operation: str) -> Iterator[None]:
        """Counts ``collection.<operation>`` when it writes on an embedded path: before
        it starts (never seen as another's) and once it is done (applied or failed)."""
        counter = self.counter if operation in WRITE_OPERATIONS else None
        if counter is None:
            yield
            return
        self._own_writes += 1
        # A ``modify`` changes the collection's metadata, never a record: no index is
        # behind for it (the first write of a namespace records the vectors' dimension).
        touching = self._touching if operation != "modify" else _METADATA_ONLY
        if touching != _METADATA_ONLY:
            self.own_record_writes += 1
        counter.note_write(touching)
        try:
            yield
        finally:
            counter.wrote(touching)

    def file_version(self) -> int | None:
        """A value that changes whenever anyone commits a write to this embedded store."""
        return None if self._file is None else self._file.read()

    def begun_on_share(self) -> int | None:
        """How many writes that can touch this namespace's share began so far, by anyone;
        None for a store's own collection (its file version tells instead), and while a
        write is in flight."""
        counter = self.counter
        if counter is None or self._share is None:
            return None
        return counter.write_mark(self._share, self._collection)

    def begun_by_others(self) -> int | None:
        """How many writes anyone but this object began on its embedded path so far: its
        process's other stores, and the writes the path's owner runs for other processes."""
        ownership = self._ownership
        begun = None if ownership is None or self._file is None else ownership.writes_begun()
        return None if begun is None else begun - self._own_writes

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class ChromaFileVersion:
    """``PRAGMA data_version`` of ``<path>/chroma.sqlite3``, on a read-only connection of
    its own. :meth:`read` is None when the file cannot be read (not there yet, say)."""

    def __init__(self, path: str) -> None:
        self._file = Path(path) / CHROMA_FILE
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # the store's threads share the connection

    def read(self) -> int | None:
        with self._lock:
            try:
                if self._conn is None:
                    if not self._file.is_file():
                        return None
                    self._conn = sqlite3.connect(
                        f"{self._file.resolve().as_uri()}?mode=ro",
                        uri=True,
                        check_same_thread=False,
                        isolation_level=None,
                    )
                return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error:
                self._close()
                return None

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
