"""The derived index's SQLite file: connection, schema, damage and start-over, the state
table, write transactions and write-ahead-log checkpoints.

Everything in the file can be rebuilt from the Chroma collection (the one rule of state),
so a damaged file is not repaired: it is replaced by an empty one, which the store refills.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import BinaryIO

from hybrid_memory._keyword.template import write_empty
from hybrid_memory._keyword.writes import create_batch_tables, fill_powers
from hybrid_memory._model.errors import IndexFileError, InvalidInputError, StoreError
from hybrid_memory._process.descriptors import descriptor_exhaustion
from hybrid_memory._process.disk_room import why_no_room

# How long a write waits for another process's write transaction on the shared index
# file. An index write stays open while its Chroma write runs (see Writer._write_batch),
# and on a path whose owner just died that Chroma write waits for the next owner to take
# over (hybrid_memory/_shared_path/ownership.py): SQLite's default 5 s is too short for that on a
# loaded machine.
BUSY_WAIT = 120.0

try:  # POSIX: repairs of one index file by several processes take turns
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("hybrid_memory")

# 2: FTS text NFKC-normalised like queries; 3: tag rows carry times; 4: row ids are
# never reused (an updated memory gets a new one), so in-memory postings stay exact.
SCHEMA_VERSION = "5"  # 5: the content hash covers the metadata
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

# SQLite result codes that mean the file is damaged or was replaced under this
# connection, not that it is busy: (primary) SQLITE_CORRUPT, SQLITE_NOTADB, and
# (extended) SQLITE_READONLY_DBMOVED, SQLITE_IOERR_SHORT_READ.
_DAMAGE_PRIMARY = {11, 26}
_DAMAGE_EXTENDED = {1032, 522}
# SQLite result codes of a write that found no room: (primary) SQLITE_FULL, (extended)
# SQLITE_IOERR_WRITE, SQLITE_IOERR_TRUNCATE, SQLITE_IOERR_SHMSIZE.
_FULL_PRIMARY = {13}
_FULL_EXTENDED = {778, 1546, 4874}

_TABLES = (
    "memories",
    "memories_vocab",
    "memories_fts",
    "memory_tags",
    "memory_meta",
    "memory_vectors",
)


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


def create_schema(conn: sqlite3.Connection, tokenizer: str, *, small: bool = False) -> None:
    """Create the tables; drop them first when the schema version or the tokenizer
    changed (the store then refills the empty index from the collection).

    Every table and index takes a page or more, and the catalogue holds their statements:
    in a namespace's file of ten memories, most of its size. So a ``small`` file (a
    namespace's) keeps its statements to single spaces, its state table without row ids
    (no second b-tree for its key), and no FTS5 table of text lengths
    (``columnsize=0``): only FTS5's own ``bm25()`` reads them (for query words it reads
    as phrases), and without the table it counts the tokens of the row's text instead,
    the same numbers (rankings unchanged: tests/unit/test_index_schema.py). A store's
    own file keeps the layout it always had (the damage tests of
    tests/integration/test_hostile_input.py place their damage by it)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS index_state (key TEXT PRIMARY KEY, value TEXT)"
        + (" WITHOUT ROWID" if small else "")
    )
    stored = dict(conn.execute("SELECT key, value FROM index_state").fetchall())
    current = stored.get("schema") == SCHEMA_VERSION and stored.get("tokenizer") == tokenizer
    if current and _holds_schema(conn):
        # A file of this version, every table and index there: only this connection's
        # scratch tables are made (the statements below, and the state written again,
        # were most of opening a namespace's index file for a search).
        _create_scratch(conn, tokenizer.replace("'", "''"))
        return
    if not current:
        for table in _TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("DELETE FROM index_state")
    spaced = _single_spaced if small else str
    conn.executescript(
        spaced(
            """
        CREATE TABLE IF NOT EXISTS memories (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            tags TEXT NOT NULL, metadata TEXT NOT NULL, content_hash TEXT NOT NULL,
            created_at REAL NOT NULL, updated_at REAL NOT NULL);
        CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash);
        CREATE INDEX IF NOT EXISTS memories_updated ON memories(updated_at);
        CREATE INDEX IF NOT EXISTS memories_created ON memories(created_at, id);
        CREATE TABLE IF NOT EXISTS memory_tags (
            tag TEXT NOT NULL, rowid INTEGER NOT NULL, created_at REAL NOT NULL,
            PRIMARY KEY (tag, rowid)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS memory_tags_row ON memory_tags(rowid);
        CREATE INDEX IF NOT EXISTS memory_tags_recent ON memory_tags(tag, created_at);
        CREATE TABLE IF NOT EXISTS memory_meta (
            rowid INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
            in_array INTEGER NOT NULL, value);
        CREATE INDEX IF NOT EXISTS memory_meta_value
            ON memory_meta(key, kind, in_array, value, rowid);
        CREATE INDEX IF NOT EXISTS memory_meta_row ON memory_meta(rowid);
        CREATE TABLE IF NOT EXISTS memory_vectors (
            rowid INTEGER PRIMARY KEY, vector BLOB NOT NULL);
        """
        )
    )
    tokenize = tokenizer.replace("'", "''")
    try:
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts "
            f"USING fts5(text, tokenize='{tokenize}'{', columnsize=0' if small else ''})"
        )
    except sqlite3.OperationalError as exc:
        raise InvalidInputError(
            "HYBRID_MEMORY_KEYWORD_TOKENIZER (keyword_tokenizer)",
            f"SQLite FTS5 rejected tokenizer {tokenizer!r}: {exc}; examples: "
            "'porter unicode61 remove_diacritics 2', 'unicode61', 'trigram'",
        ) from exc
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_vocab USING fts5vocab(memories_fts, 'row')"
    )
    _create_scratch(conn, tokenize)
    conn.executemany(
        "INSERT OR REPLACE INTO index_state VALUES (?, ?)",
        [("schema", SCHEMA_VERSION), ("tokenizer", tokenizer)],
    )


def _single_spaced(statements: str) -> str:
    """SQL as the catalogue keeps it: without the indentation (bytes of every file)."""
    return re.sub(r"\s+", " ", statements).strip()


# Every table and index :func:`create_schema` makes in the file (not the scratch ones).
_SCHEMA_OBJECTS = (
    *_TABLES,
    "index_state",
    "memories_hash",
    "memories_updated",
    "memories_created",
    "memory_tags_row",
    "memory_tags_recent",
    "memory_meta_value",
    "memory_meta_row",
)


def _holds_schema(conn: sqlite3.Connection) -> bool:
    """Whether every table and index of the schema is in the file (one read of its
    catalogue): a file missing one (a table dropped by hand, say) is given it again."""
    marks = ", ".join("?" * len(_SCHEMA_OBJECTS))
    found = conn.execute(
        f"SELECT count(DISTINCT name) FROM sqlite_master WHERE name IN ({marks})", _SCHEMA_OBJECTS
    ).fetchone()[0]
    return int(found) == len(_SCHEMA_OBJECTS)


def _create_scratch(conn: sqlite3.Connection, tokenize: str) -> None:
    """This connection's scratch tables (``tokenize``: the tokenizer, quoted for SQL)."""
    # Scratch tables with the index's tokenizer: query words tokenised as the
    # index tokenises text (temp.query_terms), every token of every indexed
    # memory in (term, row, offset) order, what the in-memory postings are built
    # from (temp.memory_terms), and the tokens of new rows (temp.new_terms).
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words "
        f"USING fts5(word, content='', tokenize='{tokenize}')"  # emptied at once
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_terms "
        "USING fts5vocab('temp', 'query_words', 'instance')"
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_terms "
        "USING fts5vocab('main', 'memories_fts', 'instance')"
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.new_texts "
        f"USING fts5(text, content='', tokenize='{tokenize}')"  # emptied at once
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.new_terms "
        "USING fts5vocab('temp', 'new_texts', 'instance')"
    )
    create_batch_tables(conn)


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
        with self._unusable_reported(), self._exclusive():
            self._open_or_start_over()

    # --- opening, damage and starting over ---------------------------------------------

    def reset(self, cause: BaseException) -> None:
        """After ``cause`` (a damage error, :func:`is_damage`): reopen the file, starting
        it over empty when it is still damaged (another process may have rebuilt it
        meanwhile). The caller refills it from the collection."""
        with self.lock, self._unusable_reported(), self._exclusive():
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

    @contextlib.contextmanager
    def _unusable_reported(self) -> Iterator[None]:
        """Opening the file: what the library cannot repair by itself (it did not make it)
        raised as :class:`IndexFileError`, naming the file and what to do."""
        path = self.path
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
                "check that its directory exists and this process may write in it, "
                "or set index_path",
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

    def _file_id(self) -> tuple[int, int] | None:
        """The index file's identity (device, inode); None in memory or when missing."""
        if not self.path:
            return None
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino)

    @contextlib.contextmanager
    def filling(self, stop: Callable[[], bool]) -> Iterator[None]:
        """A fill from scratch, one process at a time per file (``<path>.fill``): another
        process opening the same cache file meanwhile waits here (in its warming thread),
        then finds the index filled. Waits until it holds the lock or ``stop()``."""
        if not self.path or fcntl is None:
            yield
            return
        with self._lock_file(".fill") as lock:
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
    def _lock_file(self, suffix: str) -> Iterator[BinaryIO]:
        """``<path><suffix>``, opened for an advisory lock; IndexFileError when it cannot be."""
        name = f"{self.path}{suffix}"
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
    def _exclusive(self) -> Iterator[None]:
        """Opening (and any start over) under an exclusive lock on ``<path>.lock``, so
        that one process at a time checks and replaces the file."""
        if not self.path or fcntl is None:
            yield
            return
        with self._lock_file(".lock") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

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
                # A new small file (a namespace's): a copy of an empty one (template).
                with contextlib.suppress(OSError):
                    write_empty(path, self.tokenizer, self.page_size, self._create_schema)
        self.conn = sqlite3.connect(
            path or ":memory:", check_same_thread=False, isolation_level=None, timeout=BUSY_WAIT
        )
        self._opened = self._file_id()
        try:
            self._configure()
            with self.lock:
                self._create_schema(self.conn, self.tokenizer)
            # Every table read once: a damaged file fails here, on open, rather than in
            # a search (damage the probes miss is caught there: see HybridMemory._guarded).
            memories = self.conn.execute("SELECT count(*), max(updated_at) FROM memories")
            held = memories.fetchone()[0]
            for table in ("memory_meta", "memory_tags", "memories_vocab", "memories_fts"):
                self.conn.execute(f"SELECT * FROM {table} LIMIT 1").fetchall()
            # One text row per memory: rows deleted from one table and not the other, or
            # the text table dropped (and made again, empty, by the schema above) leave
            # memories out of the keyword leg or make searches fail.
            texts = self.conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0]
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

    def data_version(self) -> int:
        """Changes with every commit by another connection to the file (not this one).
        Asked before every read and write: the shared memory is checked first."""
        self.keep_shared_memory_whole()
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def keep_shared_memory_whole(self) -> None:
        """Grow ``<path>-shm`` back if another process truncated it under this one.

        SQLite maps the write-ahead log's index (the ``-shm`` file) into memory; touching
        a mapped page beyond the end of a truncated file kills the process with SIGBUS,
        which no handler can turn into an error. Checked before each access (a stat: a
        microsecond or two), a file found shorter than this connection saw it is grown
        back to that size with zeros, which SQLite reads as an index to rebuild from the
        log (its recovery): the reader carries on, with the rows as they are. (The file
        replaced, or removed, leaves this process's mapping on the old file: harmless.)
        What stays is the moment between this check and SQLite's access."""
        if not self.path:
            return
        shared = f"{self.path}-shm"
        try:
            size = os.stat(shared).st_size
        except OSError:
            return
        if size < self._shared_memory_size:
            log.warning(
                "the keyword index's shared memory %s was truncated under this process "
                "(%d of %d bytes); grown back for SQLite to rebuild",
                shared,
                size,
                self._shared_memory_size,
            )
            with contextlib.suppress(OSError):
                os.truncate(shared, self._shared_memory_size)
        else:
            self._shared_memory_size = size

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
