"""Whether anyone wrote to an embedded Chroma store since a moment, asked in microseconds.

Every write to an embedded Chroma path, by any process (the owner of the path applies
the others' writes, see :mod:`hybrid_memory._shared_path.ownership`), commits to the path's SQLite
file ``chroma.sqlite3``. SQLite's ``PRAGMA data_version``, read on a connection that
never writes, changes whenever another connection committed to the file: two equal
readings mean nothing was written in between. The periodic check for other processes'
writes asks Chroma for a count and a filtered read, which take time in proportion to the
collection (~40 ms at 100,000 memories, ~0.4 s at a million); it runs only when the
file changed.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

CHROMA_FILE = "chroma.sqlite3"


class WriteMarker:
    """``PRAGMA data_version`` of ``<path>/chroma.sqlite3``, on a read-only connection of
    its own. :meth:`read` is None when the file cannot be read (not there yet, say):
    the caller then cannot tell, and checks."""

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
