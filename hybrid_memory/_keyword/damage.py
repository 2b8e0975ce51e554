"""What an sqlite3 error of the keyword index means: damage (the file is rebuilt from the
collection), a write that found no room (the user frees space), or something else (raised
with SQLite's words). Pure decisions over error codes and messages, and the library's error
for each."""

from __future__ import annotations

import sqlite3

from hybrid_memory._model.errors import IndexFileError, StoreError
from hybrid_memory._process.descriptors import descriptor_exhaustion
from hybrid_memory._process.disk_room import why_no_room

# SQLite result codes that mean the file is damaged or was replaced under this
# connection, not that it is busy: (primary) SQLITE_CORRUPT, SQLITE_NOTADB, and
# (extended) SQLITE_READONLY_DBMOVED, SQLITE_IOERR_SHORT_READ.
_DAMAGE_PRIMARY = {11, 26}
_DAMAGE_EXTENDED = {1032, 522}
# SQLite result codes of a write that found no room: (primary) SQLITE_FULL, (extended)
# SQLITE_IOERR_WRITE, SQLITE_IOERR_TRUNCATE, SQLITE_IOERR_SHMSIZE.
_FULL_PRIMARY = {13}
_FULL_EXTENDED = {778, 1546, 4874}


class IndexDamaged(sqlite3.DatabaseError):
    """The index's tables contradict each other (damage SQLite itself did not notice)."""


def is_full(exc: BaseException) -> bool:
    """Whether an sqlite3 error says a write found no room: the disk is full
    (SQLITE_FULL), or the file system refused to grow a file of the index, its log or its
    shared memory (SQLITE_IOERR_WRITE, _TRUNCATE, _SHMSIZE: EFBIG past the process's file
    size limit, or ENOSPC where SQLite does not map it to SQLITE_FULL)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # Python < 3.11: only the message tells
        return "database or disk is full" in str(exc)
    return code & 0xFF in _FULL_PRIMARY or code in _FULL_EXTENDED


def index_failure(path: str | None, exc: BaseException) -> IndexFileError | StoreError:
    """The library's error for an sqlite3 error of the index file ``path``: what a user can
    act on when the file found no room (:func:`is_full`), else SQLite's own words."""
    where = path or "(in memory)"
    if is_full(exc):
        return IndexFileError(
            where,
            f"the keyword index could not write to this file or its -wal / -shm files: "
            f"{why_no_room(where) or 'the disk is full or the file cannot grow'} "
            f"(SQLite: {exc})",
            "free space (or raise the limit) and the index catches up with the collection "
            "by itself; the memories the store acknowledged are kept",
        )
    exhausted = descriptor_exhaustion(exc)
    if exhausted:
        return StoreError(f"the keyword index {where} cannot be opened: {exhausted}")
    return StoreError(f"the keyword index {where} failed: {exc}")


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the connection's transaction, if it still has one: SQLite rolls back by
    itself on some errors (a full disk), and a second ROLLBACK would raise "no
    transaction is active" in place of the error that matters."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def is_damage(exc: BaseException) -> bool:
    """Whether an sqlite3 error says the index file is damaged (rebuild it), rather than
    busy, locked or misused."""
    if isinstance(exc, IndexDamaged):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if any(m in str(exc) for m in ("no such table", "no such fts5 table", "vtable constructor")):
        return True  # tables this index created are gone: the file was replaced or damaged
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # Python < 3.11: only the message tells
        text = str(exc).lower()
        return any(m in text for m in ("malformed", "not a database", "corrupt", "disk i/o error"))
    return code & 0xFF in _DAMAGE_PRIMARY or code in _DAMAGE_EXTENDED
