"""Reaching the keyword index file: what keeps the library from opening it, told as a
user can act on it, and the advisory locks by which processes take turns at it (one opens
or replaces the file at a time; one fills a new one from scratch)."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

from hybrid_memory._keyword.damage import is_damage
from hybrid_memory._model.errors import IndexFileError, StoreError
from hybrid_memory._process.descriptors import descriptor_exhaustion

log = logging.getLogger("hybrid_memory")

try:  # POSIX: repairs of one index file by several processes take turns
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def unusable_reported(path: str | None) -> Iterator[None]:
    """Opening the file: what the library cannot repair by itself (it did not make it)
    raised as :class:`IndexFileError`, naming the file and what to do."""
    if not path:
        yield
        return
    remove = "remove it (the index is rebuilt from the collection) or set index_path"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG  # a new file
    except OSError as exc:
        raise IndexFileError(
            path,
            f"the keyword index file cannot be reached ({exc.strerror or exc})",
            "check that its directory exists and this process may write in it, or set index_path",
        ) from exc
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise IndexFileError(path, f"the keyword index file is {kind}", remove)
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        if isinstance(exc, sqlite3.OperationalError) and is_damage(exc):
            raise
        exhausted = descriptor_exhaustion(exc)
        if exhausted:
            raise StoreError(f"the keyword index {path} cannot be opened: {exhausted}") from exc
        access = "read and write" if os.path.exists(path) else "create"
        raise IndexFileError(
            path,
            f"the keyword index file cannot be opened ({exc})",
            f"check that this process may {access} it and its directory, or {remove}",
        ) from exc


@contextlib.contextmanager
def filling(path: str | None, stop: Callable[[], bool]) -> Iterator[None]:
    """A fill from scratch, one process at a time per file (``<path>.fill``): another
    process opening the same cache file meanwhile waits here (in its warming thread),
    then finds the index filled. Waits until it holds the lock or ``stop()``."""
    if not path or fcntl is None:
        yield
        return
    with _lock_file(path, ".fill") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stop():
                    yield
                    return
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _lock_file(path: str | None, suffix: str) -> Iterator[BinaryIO]:
    """``<path><suffix>``, opened for an advisory lock; IndexFileError when it cannot be."""
    name = f"{path}{suffix}"
    try:
        lock = open(name, "a+b")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise IndexFileError(
            name,
            f"the keyword index's lock file cannot be opened ({exc.strerror or exc})",
            "if it is not a file, remove it (it holds no data); else give this process "
            "read and write access to it and its directory",
        ) from exc
    with lock:
        yield lock


@contextlib.contextmanager
def exclusive(path: str | None) -> Iterator[None]:
    """Opening (and any start over) under an exclusive lock on ``<path>.lock``, so
    that one process at a time checks and replaces the file."""
    if not path or fcntl is None:
        yield
        return
    with _lock_file(path, ".lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def keep_whole(shared: str, seen: int) -> int:
    """Grow the shared-memory file ``shared`` (``<path>-shm``) back to ``seen`` bytes if
    another process truncated it under this one; returns the size to remember.

    SQLite maps the write-ahead log's index (the ``-shm`` file) into memory; touching a
    mapped page beyond the end of a truncated file kills the process with SIGBUS, which
    no handler can turn into an error. Checked before each access (a stat: a microsecond
    or two), a file found shorter than this connection saw it is grown back to that size
    with zeros, which SQLite reads as an index to rebuild from the log (its recovery):
    the reader carries on, with the rows as they are. (The file replaced, or removed,
    leaves this process's mapping on the old file: harmless.) What stays is the moment
    between this check and SQLite's access."""
    try:
        size = os.stat(shared).st_size
    except OSError:
        return seen
    if size >= seen:
        return size
    log.warning(
        "the keyword index's shared memory %s was truncated under this process "
        "(%d of %d bytes); grown back for SQLite to rebuild",
        shared,
        size,
        seen,
    )
    with contextlib.suppress(OSError):
        os.truncate(shared, seen)
    return seen
