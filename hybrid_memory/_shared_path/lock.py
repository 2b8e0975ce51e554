"""An exclusive, non-blocking lock on one file, held by this process until released or
until it exits (the OS frees it then, kill -9 included): how the processes on one
embedded store path elect its owner (:mod:`hybrid_memory._shared_path.ownership`).

POSIX systems lock with ``flock``; Windows with ``msvcrt.locking`` on the file's first
byte. Neither module is imported at module level where it does not exist, so
``import hybrid_memory`` works everywhere; a platform with neither fails only when an
embedded path is shared, with :class:`StoreError` saying so.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from types import ModuleType

from hybrid_memory._model.errors import StoreError

fcntl: ModuleType | None
msvcrt: ModuleType | None
try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None
try:  # Windows
    import msvcrt
except ImportError:
    msvcrt = None

_UNSUPPORTED = (
    "this platform has neither fcntl nor msvcrt file locks, which processes sharing an "
    "embedded store path need; use an in-memory store or a Chroma server (url=, "
    "HYBRID_MEMORY_URL)"
)


class PathLock:
    """The lock file ``path`` (created when missing), taken with :meth:`try_take`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self.held = False

    def try_take(self) -> bool:
        """Take the lock if nobody holds it: True when this process holds it now, False
        when another process does. StoreError when the lock file cannot be opened or its
        file system has no working locks."""
        if fcntl is None and msvcrt is None:
            raise StoreError(f"could not lock {self.path}: {_UNSUPPORTED}")
        if self._fd is None:
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            try:
                self._fd = os.open(self.path, flags, 0o600)
            except OSError as exc:
                raise StoreError(
                    f"could not open the store's lock file {self.path}: {exc.strerror}; the "
                    "store directory must be writable"
                ) from exc
        try:
            _lock(self._fd)
        except OSError as exc:
            if isinstance(exc, BlockingIOError) or exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise StoreError(
                f"the file system of {self.path.parent} does not support file locks "
                f"({exc.strerror}), which processes sharing an embedded store need; put the "
                "store on a local disk, or use a Chroma server (url=, HYBRID_MEMORY_URL)"
            ) from exc
        self.held = True
        return True

    def unlock(self) -> None:
        """Give the lock up and keep the file open (to take it again later)."""
        if self._fd is not None and self.held:
            with contextlib.suppress(OSError):
                _unlock(self._fd)
        self.held = False

    def close(self) -> None:
        """Give the lock up and close the file."""
        self.unlock()
        self.forget()

    def forget(self) -> None:
        """Close the file without unlocking first (a forked child's inherited copy: on
        POSIX closing it does not free the parent's lock, which belongs to the open file
        the parent still holds)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None
        self.held = False


def _lock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:  # pragma: no cover - Windows
        assert msvcrt is not None
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)


def _unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:  # pragma: no cover - Windows
        assert msvcrt is not None
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
