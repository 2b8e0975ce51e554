"""The process's file descriptors: how many namespaces a store keeps open, and an error
that names the limit when it is hit anyway.

Why: every open namespace holds its keyword index file (SQLite: the file, its ``-wal``
and ``-shm``, three descriptors) and worker threads; before namespaces were closed when
idle, 300 namespaces of 10 on one path held 2,120 descriptors, and under ``ulimit -n
256`` the store failed at namespace 42 with an error that blamed the file's permissions.

How: a store keeps at most :func:`namespaces_kept_open` namespaces open (a quarter of the
limit, three descriptors each, at most :data:`NAMESPACES_OPEN`) and closes the least
recently used beyond it (see hybrid_memory._memory.parts). What this cannot bound: embedded
Chroma on a path keeps HNSW index files open itself, four per index (chromadb 1.5.9,
measured): up to 64 indexes it wrote lately (~256 descriptors), and a cache of indexes
it read sized from the limit when its client starts (``RLIMIT_NOFILE // 5``). With a
smaller read cache than the collections a process searches, Chroma's queries fail
("Error creating hnsw segment reader: Nothing found on disk"), so a path with many
namespaces needs a high ``ulimit -n`` (see docs/namespaces.md); a store on a Chroma
server holds none of those files. A limit hit anyway is reported as what it is
(:func:`descriptor_exhaustion`).
"""

from __future__ import annotations

import errno
import os

try:
    import resource
except ImportError:  # Windows: no RLIMIT_NOFILE to share out
    resource = None  # type: ignore[assignment]

NAMESPACE_SHARE = 0.25
NAMESPACES_OPEN = 256  # ~1 MB of resident memory and up to three threads each
_DESCRIPTORS_PER_NAMESPACE = 3
_FREE_ENOUGH = 8  # fewer free descriptors than this after a failed open: the limit is why


def descriptor_limit() -> int | None:
    """This process's soft limit on open files (``ulimit -n``); None when unknown."""
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def open_descriptors() -> int | None:
    """How many files this process has open now (Linux, macOS); None when unknown."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder)) - 1  # less the listing's own descriptor
        except OSError:
            continue
    return None


def namespaces_kept_open() -> int:
    """How many namespaces a store keeps open at once when ``open_namespaces`` is not
    set: a quarter of the descriptor limit, three descriptors each, at least 4 and at most
    :data:`NAMESPACES_OPEN`."""
    limit = descriptor_limit()
    if limit is None:
        return NAMESPACES_OPEN
    share = int(limit * NAMESPACE_SHARE) // _DESCRIPTORS_PER_NAMESPACE
    return max(4, min(NAMESPACES_OPEN, share))


def _fewer_free_than(wanted: int) -> bool:
    """Whether fewer than ``wanted`` more files can be opened now (EMFILE before that):
    an open of several files (SQLite's index and its -wal and -shm, an HNSW index's four)
    failed for want of them, though one may be free again once it gave up."""
    probes: list[int] = []
    try:
        for _ in range(wanted):
            probes.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        return exc.errno == errno.EMFILE
    finally:
        for probe in probes:
            os.close(probe)
    return False


def descriptor_exhaustion(exc: BaseException | None = None) -> str | None:
    """What to say when ``exc`` came from this process running out of file descriptors
    (EMFILE: ``errno`` 24, or SQLite's "unable to open database file" while the limit is
    reached); None when it did not."""
    reached = isinstance(exc, OSError) and exc.errno == errno.EMFILE
    if not reached and exc is not None and "too many open files" in str(exc).lower():
        reached = True
    limit = descriptor_limit()
    if not reached and limit is not None:
        reached = _fewer_free_than(_FREE_ENOUGH)
    if not reached:
        return None
    now_text = f"now {limit}" if limit is not None else "RLIMIT_NOFILE"
    return (
        f"too many open files: this process reached its limit on open file descriptors; "
        f"raise `ulimit -n` ({now_text}), or keep fewer namespaces open "
        f"at once (the setting open_namespaces, HYBRID_MEMORY_OPEN_NAMESPACES), or close "
        f"stores this process no longer uses"
    )
