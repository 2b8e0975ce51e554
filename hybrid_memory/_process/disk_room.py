"""Room to write: an embedded store refuses a write, with :class:`StoreError` naming the
cause, while its disk has less free space than the write reserve or its files are within
the reserve of the process's file size limit; and, once a write failed, why it may have
found no room.

Why: embedded Chroma (1.5.9) does not fail cleanly when its files cannot grow. Its first
writes that find no room fail ("Error in compaction: Failed to apply logs to the metadata
segment", after its log already took the records), and a few writes later one hangs
inside Chroma while holding the GIL, freezing every thread of the process (observed with
``RLIMIT_FSIZE``; tests/integration/test_full_disk.py). Stopping short of the edge keeps
the process answering: reads go on, and writes resume once space returns.
"""

from __future__ import annotations

import os

from hybrid_memory._model.errors import StoreError

_SETTING = "write_reserve, HYBRID_MEMORY_WRITE_RESERVE"


def check_room(path: str, reserve: int) -> None:
    """Raise StoreError when a write to the embedded store at ``path`` must be refused
    (see the module docstring); ``reserve`` in bytes, 0 checks nothing."""
    if reserve <= 0:
        return
    try:
        free = os.statvfs(path)
    except (AttributeError, OSError):  # no statvfs (Windows), or no directory yet
        free = None
    if free is not None:
        available = free.f_bavail * free.f_frsize
        if available < reserve:
            raise StoreError(
                f"the disk holding the store {path} is full: {available // 1024} KiB free, "
                f"less than the write reserve of {reserve // 1024} KiB ({_SETTING}); the "
                "write was refused and nothing of it stored. Free space and write again; "
                "reads go on meanwhile"
            )
    limit = _file_size_limit()
    if limit is None:
        return
    largest, name = 0, path
    for directory, _, files in os.walk(path):
        for file in files:
            where = os.path.join(directory, file)
            try:
                size = os.path.getsize(where)
            except OSError:
                continue
            if size > largest:
                largest, name = size, where
    if largest + reserve > limit:
        raise StoreError(
            f"the file {name} ({largest} bytes) cannot grow: it is within the write reserve "
            f"of {reserve // 1024} KiB ({_SETTING}) of this process's file size limit of "
            f"{limit} bytes (RLIMIT_FSIZE, ulimit -f); the write was refused and nothing of "
            "it stored. Raise the limit and write again; reads go on meanwhile"
        )


def why_no_room(path: str) -> str:
    """Why a write to ``path`` may find no room, as far as this process can tell: its
    file system nearly full, or a file size limit on the process ("" when neither)."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    reasons = []
    try:
        free = os.statvfs(directory)
        available = free.f_bavail * free.f_frsize
        if available < 16 * 1024 * 1024:
            reasons.append(f"the disk is full ({available // 1024} KiB free in {directory})")
    except (AttributeError, OSError):  # no statvfs (Windows)
        pass
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY:
            reasons.append(
                f"the file cannot grow past this process's file size limit of {limit} bytes "
                "(RLIMIT_FSIZE, ulimit -f)"
            )
    except (ImportError, OSError, ValueError):  # Windows
        pass
    return " and ".join(reasons)


def _file_size_limit() -> int | None:
    """This process's file size limit in bytes; None when unlimited or unknown."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)
