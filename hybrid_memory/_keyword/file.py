"""The derived index's SQLite file: its one connection, start-over on damage, the state
table, write transactions and write-ahead-log checkpoints.

Everything in the file can be rebuilt from the Chroma collection (the one rule of state),
so a damaged file is not repaired: it is replaced by an empty one, which the store refills.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait

from hybrid_memory._keyword.damage import IndexDamaged, is_damage
from hybrid_memory._keyword.file_access import exclusive, filling, keep_whole, unusable_reported
from hybrid_memory._keyword.schema import EPOCH_KEY, create_schema, text_count
from hybrid_memory._keyword.template import write_empty
from hybrid_memory._keyword.writes import fill_powers

# How long a write waits for another process's write transaction on the shared index
# file. An index write stays open while its Chroma write runs (see Writer._write_batch),
# and on a path whose owner just died that Chroma write waits for the next owner to take
# over (hybrid_memory/_shared_path/ownership.py): SQLite's default 5 s is too short for that on a
# loaded machine.
BUSY_WAIT = 120.0

log = logging.getLogger("hybrid_memory")

# SQLite page cache of the index connection, in KiB (a negative cache_size). 64 MiB
# before 2026-11-26: filling a store of 100,000 memories left it full (the pages the
# writes touched, ~85 MB of the process with the allocator's overhead), while searches
# read a few pages each and ran as fast with 8 MiB (filtered searches within the
# machine's noise); the other pages come from the OS's file cache.
_CACHE_KIB = 8 * 1024
# Rows the writes changed since the last checkpoint of a file index's write-ahead log
# before a write's commit queues the next one. Counted inside writes only (sqlite3's
# total_changes also counts the temporary tables searches fill: counted whole, a search
# or two between single adds would queue a checkpoint after nearly every add). A memory
# changes some 30 rows (its row, text, tags, metadata, the scratch tables), so this is
# one checkpoint per bulk batch, or per ~30 single adds.
CHECKPOINT_CHANGES = 1_000


class IndexFile:
    """One connection to the index file (``path=None``: in memory), shared by all
    threads under :attr:`lock`.

    Tables: ``memories`` (one row per memory), ``memories_fts`` (FTS5 over the text),
    ``memory_tags`` and ``memory_meta`` (for tag matches and filters), ``memory_vectors``
    (a half-precision copy of the vectors this store wrote, for the search's feedback
    step; rows another process or a rebuild wrote may lack one), ``index_state``
    (key/value pairs the store keeps beside the rows), plus per-connection scratch tables.
    """

    def __init__(self, path: str | None, tokenizer: str, *, page_size: int | None = None) -> None:
        self.path = path
        self.tokenizer = tokenizer
        # The page size of a file created here (SQLite's default, 4 KiB, when None): an
        # empty index is ~20 tables and indexes of a page or more each, 84 KiB at 4 KiB
        # and 12.5 KiB at 512 bytes, which is most of what a namespace of ten memories
        # costs. Such a file is also made small in its schema (create_schema's ``small``).
        self.page_size = page_size
        self.lock = threading.RLock()
        self.conn: sqlite3.Connection
        self.opened_empty = False  # the file held no memories when (re)opened
        # Runs writes beside Chroma's, and checkpoints: one job at a time.
        self._pool: ThreadPoolExecutor | None = None
        self.pending_checkpoint: Future[None] | None = None  # the last one queued
        self._changes_written = 0  # by writes, since the last checkpoint
        self._write_started = 0  # total_changes when the current write began
        self._shared_memory_size = 0  # the largest size of <path>-shm seen (see below)
        with unusable_reported(self.path), exclusive(self.path):
            self._open_or_start_over()

    # --- opening, damage and starting over ---------------------------------------------

    def reset(self, cause: BaseException) -> None:
        """After ``cause`` (a damage error, :func:`is_damage`): reopen the file, starting
        it over empty when it is still damaged (another process may have rebuilt it
        meanwhile). The caller refills it from the collection."""
        with self.lock, unusable_reported(self.path), exclusive(self.path):
            if self._pool is not None:
                # Not waited for: a checkpoint queued by the last write may be waiting for
                # the lock this holds (waiting here deadlocked a writer whose index was
                # damaged). It runs once the lock is free, on the new connection: a
                # PASSIVE checkpoint there is harmless.
                self._pool.shutdown(wait=False)
                self._pool = None
            self.pending_checkpoint = None
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
            if self._file_id() == self._opened:
                # Still the file this connection found damaged: start it over. (Another
                # process that found it damaged first replaced it: that one is opened.)
                self._start_over(cause)
                return
            if self._open_or_start_over():
                log.warning("keyword index %s reopened after: %s", self.path, cause)

    def _file_id(self) -> tuple[int, int] | None:
        """The index file's identity (device, inode); None in memory or when missing."""
        if not self.path:
            return None
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino)

    def filling(self, stop: Callable[[], bool]) -> contextlib.AbstractContextManager[None]:
        """A fill from scratch, one process at a time per file (:func:`filling`)."""
        return filling(self.path, stop)

    def _open_or_start_over(self) -> bool:
        """Open the file; start it over empty if SQLite finds it damaged. True when the
        file opened as it was."""
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            self._start_over(exc)
            return False
        return True

    def _start_over(self, cause: BaseException) -> None:
        """Replace a damaged index file with an empty one (it is derived data)."""
        log.warning(
            "keyword index %s is damaged (%s): rebuilding it from the collection",
            self.path,
            cause,
        )
        with contextlib.suppress(sqlite3.Error, AttributeError):
            self.conn.close()
        if self.path:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path + suffix)
        self._open()

    def _open(self) -> None:
        """Open the file (creating the schema) and probe that its tables can be read;
        sqlite3.DatabaseError when they cannot."""
        path = self.path
        copied = False
        if path and (not os.path.exists(path) or os.path.getsize(path) == 0):
            # No database file (or an empty one) beside a write-ahead log: the file was
            # deleted or emptied while another connection used it, and that log (and its
            # shared-memory index) belong to the old file: read with a new one, they
            # would make a chimera of both. An empty file is removed too (it holds
            # nothing; SQLite writes a new file's header when it turns on the log): a
            # connection still open on it holds its lock, and turning the log on in
            # that same file waited for it, then failed ("database is locked").
            with contextlib.suppress(OSError):  # where it cannot be, it is reused
                if os.path.getsize(path) == 0:
                    os.unlink(path)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + suffix)
            if self.page_size and not os.path.exists(path):
                # A new small file (a namespace's): a copy of an empty one (template),
                # given an epoch of its own below.
                with contextlib.suppress(OSError):
                    write_empty(path, self.tokenizer, self.page_size, self._create_schema)
                    copied = True
        self.conn = sqlite3.connect(
            path or ":memory:", check_same_thread=False, isolation_level=None, timeout=BUSY_WAIT
        )
        if copied:
            with contextlib.suppress(sqlite3.Error):  # the template's is every copy's
                self.start_epoch(self.conn)
        self._opened = self._file_id()
        try:
            self._configure()
            with self.lock:
                self._create_schema(self.conn, self.tokenizer)
            # Every table read once: a damaged file fails here, on open, rather than in
            # a search (damage the probes miss is caught there: see HybridMemory._guarded).
            held = self.conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            for table in ("memory_meta", "memory_tags", "memories_vocab", "memories_fts"):
                self.conn.execute(f"SELECT * FROM {table} LIMIT 1").fetchall()
            # One text row per memory: rows deleted from one table and not the other, or
            # the text table dropped (and made again, empty, by the schema above) leave
            # memories out of the keyword leg or make searches fail.
            texts = text_count(self.conn)
            if texts != held:
                raise IndexDamaged(f"{held} memories but {texts} texts in the keyword index")
            first = self.conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone()
            self.opened_empty = first is None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
            raise
        self._changes_written = 0
        self._write_started = 0
        self._shared_memory_size = 0  # a new connection: its own mapping

    def _create_schema(self, conn: sqlite3.Connection, tokenizer: str) -> None:
        # A file given its page size is a namespace's, mostly small (see create_schema).
        create_schema(conn, tokenizer, small=self.page_size is not None)

    def _configure(self) -> None:
        if not self.path:
            return
        if self.page_size:  # before the first table; an existing file keeps its own
            self.conn.execute(f"PRAGMA page_size={int(self.page_size)}")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        # Filters and id lookups jump around the tables: a page cache larger than
        # SQLite's default 2 MiB keeps their pages. Not mmap: a process reading a
        # memory-mapped file that another process truncates dies of SIGBUS, and the
        # index is a file other processes may rebuild.
        self.conn.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        # SQLite's own checkpoint runs inside the COMMIT that fills the log past 1,000
        # pages, on the writer's thread: the index queues its own instead (:meth:`committed`).
        self.conn.execute("PRAGMA wal_autocheckpoint=0")

    # --- the state table ----------------------------------------------------------------

    def get_state(self, key: str) -> str | None:
        with self.lock:
            row = self.conn.execute(
                "SELECT value FROM index_state WHERE key = ?", (key,)
            ).fetchone()
            return row[0] if row else None

    def set_state(self, key: str, value: str) -> None:
        with self.writing() as c:
            c.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?)", (key, value))
            self.committed()

    def epoch(self) -> str:
        """A name for the file's rows as one lineage (row ids only grow within it): what
        files derived from it (the postings kept beside it) are checked against. A new
        one when the file starts over (a new file, its rows cleared: :meth:`start_epoch`)."""
        current = self.get_state(EPOCH_KEY)
        if current is None:
            with self.writing() as c:
                current = self.start_epoch(c)
                self.committed()
        return current

    def start_epoch(self, conn: sqlite3.Connection) -> str:
        """A new :meth:`epoch`, written on ``conn`` (in the caller's write)."""
        current = uuid.uuid4().hex
        conn.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?)", (EPOCH_KEY, current))
        return current

    def data_version(self) -> int:
        """Changes with every commit by another connection to the file (not this one).
        Asked before every read and write: the shared memory is checked first."""
        self.keep_shared_memory_whole()
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def keep_shared_memory_whole(self) -> None:
        """Grow ``<path>-shm`` back if another process truncated it under this one
        (:func:`~hybrid_memory._keyword.file_access.keep_whole`)."""
        if self.path:
            self._shared_memory_size = keep_whole(f"{self.path}-shm", self._shared_memory_size)

    # --- writes and checkpoints ---------------------------------------------------------

    def worker(self) -> ThreadPoolExecutor:
        """The one thread that runs writes beside Chroma's, and checkpoints."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="hybrid-memory-index")
        return self._pool

    @contextlib.contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock, for a write that starts after the checkpoint
        the last write queued has finished: it is waited for outside the lock, which the
        checkpoint takes. SQLite then starts the log over from its beginning (unless
        another connection still reads it), as after its own checkpoint in the commit: the
        log stays within the largest transaction plus :data:`CHECKPOINT_CHANGES` rows'
        worth, whatever the threads' timing. The checkpoint overlaps the caller's work
        between writes (the next batch's rows and JSON), not the next write."""
        while True:
            pending = self.pending_checkpoint
            if pending is not None:
                wait([pending])
            self.lock.acquire()
            if self.pending_checkpoint is None or self.pending_checkpoint.done():
                break
            self.lock.release()  # another thread's write queued one meanwhile
        try:
            # The scratch powers of two a first write fills are not its changes: counted,
            # they would queue a checkpoint after a handful of rows.
            fill_powers(self.conn)
            self._write_started = self.conn.total_changes
            finished, self.pending_checkpoint = self.pending_checkpoint, None
            if finished is not None:
                finished.result()  # anything but an sqlite3.Error (a bug) is raised once
            yield self.conn
        finally:
            self.lock.release()

    def committed(self) -> None:
        """After a write's commit, under the lock: queue a checkpoint of a file index's
        write-ahead log once writes changed :data:`CHECKPOINT_CHANGES` rows since the last."""
        changes = self.conn.total_changes
        self._changes_written += changes - self._write_started
        self._write_started = changes
        if not self.path or self._changes_written < CHECKPOINT_CHANGES:
            return
        self._changes_written = 0
        self.pending_checkpoint = self.worker().submit(self._checkpoint)

    def _checkpoint(self) -> None:
        """Copy the write-ahead log into the database file, in the worker thread. PASSIVE
        waits for no one; what it cannot copy (a reader on another connection still needs
        it, or that connection holds a lock: sqlite3.Error) the next checkpoint copies,
        so a failure here is harmless and is dropped rather than raised in a later write."""
        with self.lock, contextlib.suppress(sqlite3.Error):
            self.keep_shared_memory_whole()
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        # Once the pending checkpoint has finished, nothing else can be queued while the
        # lock is held: the pool shuts down idle, and SQLite checkpoints on close.
        with self.writing() as c:
            if self._pool is not None:
                self._pool.shutdown()
            self.keep_shared_memory_whole()  # SQLite checkpoints on close
            c.close()
