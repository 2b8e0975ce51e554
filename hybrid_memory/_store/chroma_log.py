"""Where an embedded Chroma collection's write-ahead log stands, read from Chroma's own
SQLite file without Chroma.

Every write to a collection of an embedded Chroma path (an add, upsert, update or
delete, by any process: the path's owner applies the others' writes) is appended to
Chroma's log with a sequence number that only grows, and applied at once to the
collection's metadata segment, which keeps the highest number applied (its row of
``max_seq_id``). That number, with the collection's id and its count of records, is the
collection's **position**: while it reads the same, nobody wrote to the collection.

The keyword index stores the position at which it was last known to hold exactly what
the collection holds (:mod:`hybrid_memory._store.sync`); a store opening compares the two
and skips reading the collection when they agree. A position is read in well under a
millisecond (two indexed reads), where comparing ids reads every record.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

CHROMA_FILE = "chroma.sqlite3"
_METADATA_SEGMENT = "SELECT id FROM segments WHERE collection = ? AND scope = 'METADATA'"


class LogPosition:
    """The log position of one Chroma collection on an embedded path, read on a
    read-only connection of its own (kept: a read is then three indexed lookups)."""

    def __init__(self, path: str, collection_id: str) -> None:
        self._file = Path(path) / CHROMA_FILE
        self._collection_id = collection_id
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # the store's threads share the connection

    def read(self) -> str | None:
        """``"<collection id>:<last sequence number applied>:<records>"``; None when it
        cannot be read (no file yet, a layout this Chroma does not have): the caller
        then compares the collection itself."""
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
                return self._read(self._conn)
            except sqlite3.Error:
                self._close()
                return None

    def _read(self, conn: sqlite3.Connection) -> str | None:
        segment = conn.execute(_METADATA_SEGMENT, (self._collection_id,)).fetchone()
        if segment is None:
            return None
        applied = conn.execute(
            "SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (segment[0],)
        ).fetchone()
        (held,) = conn.execute(
            "SELECT COUNT(*) FROM embeddings WHERE segment_id = ?", (segment[0],)
        ).fetchone()
        sequence = 0 if applied is None else _sequence(applied[0])
        return f"{self._collection_id}:{sequence}:{int(held)}"

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _sequence(value: object) -> int:
    """A sequence number as Chroma stores it: an integer (earlier versions: big-endian
    bytes)."""
    if value is None:
        return 0
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return int(value)  # type: ignore[call-overload]
