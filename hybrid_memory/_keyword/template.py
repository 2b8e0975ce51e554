"""A new keyword index file, written as a copy of an empty one made once per process.

Creating a namespace makes its index file: the schema's ~20 statements and the switch
to write-ahead logging took 13 of the 15 ms the new file cost (a cProfile of 180
creates of the tenants benchmark, machine load ~3), which is a good part of what creating
a namespace costs beyond Chroma's own add. An empty file of the same schema, tokenizer and
page size holds the same bytes every time: it is made once (in a temporary directory,
through the same ``create_schema``), kept in memory (12.5 KiB at 512-byte pages), and each
new file is those bytes, put in place with a hard link so that a file someone else made
meanwhile is never overwritten.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable

_templates: dict[tuple[str, int], bytes] = {}
_lock = threading.Lock()


def write_empty(
    path: str,
    tokenizer: str,
    page_size: int,
    create_schema: Callable[[sqlite3.Connection, str], None],
) -> None:
    """Make ``path`` an empty index file (schema, ``tokenizer``, ``page_size``, in WAL
    mode), unless a file is there already (then nothing is done)."""
    image = _template(tokenizer, page_size, create_schema)
    staged = f"{path}.new-{os.getpid()}-{threading.get_ident()}"
    with open(staged, "wb") as out:
        out.write(image)
    try:
        os.link(staged, path)  # fails if a file is there: that one is kept
    except OSError:
        pass  # a file is there, or no hard links here: SQLite makes one as it would
    finally:
        os.unlink(staged)


def _template(
    tokenizer: str, page_size: int, create_schema: Callable[[sqlite3.Connection, str], None]
) -> bytes:
    key = (tokenizer, page_size)
    with _lock:
        image = _templates.get(key)
        if image is None:
            with tempfile.TemporaryDirectory(prefix="hybrid-memory-index-") as folder:
                file = os.path.join(folder, "empty.sqlite3")
                conn = sqlite3.connect(file, isolation_level=None)
                try:
                    conn.execute(f"PRAGMA page_size={int(page_size)}")
                    conn.execute("PRAGMA journal_mode=WAL")
                    create_schema(conn, tokenizer)
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    conn.close()
                with open(file, "rb") as made:
                    image = made.read()
            _templates[key] = image
        return image
