"""The derived keyword index: BM25 over SQLite FTS5, plus the tag and metadata tables
the keyword and tag legs filter with.

Derived state (docs/architecture.md, "The one rule of state"): every row here can be rebuilt
from the Chroma collection, and :class:`~hybrid_memory.memory.HybridMemory` checks
it against the collection on open. FTS5 ranks with Okapi BM25 (k1 = 1.2, b = 0.75;
Robertson & Zaragoza 2009), stems with Porter by default, persists, and updates
incrementally, so adding a memory costs a fraction of a millisecond instead of an
index rebuild.

Ranking itself runs over :class:`~hybrid_memory.postings.Postings`, numpy arrays built
from FTS5's own tokens on the first search and kept in step with every write (and
with other connections' writes, through ``PRAGMA data_version``): the same BM25
scores without a ``bm25()`` call per matching row. Query words that FTS5 reads as
phrases (several tokens, as with the trigram tokenizer) are ranked by FTS5 itself.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import re
import sqlite3
import struct
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from hybrid_memory.carriers import CAPACITY, TagCarriers
from hybrid_memory.filters import (
    RESERVED_FIELDS,
    TAGS_FIELD,
    Node,
    fields_of,
    kind_of,
    matches,
    metadata_rows,
    to_sql,
)
from hybrid_memory.postings import FloatArray, IntArray, Postings, Tokens, best_first
from hybrid_memory.records import IndexRow

try:  # POSIX: repairs of one index file by several processes take turns
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("hybrid_memory")

# SQLite result codes that mean the file is damaged or was replaced under this
# connection, not that it is busy: (primary) SQLITE_CORRUPT, SQLITE_NOTADB, and
# (extended) SQLITE_READONLY_DBMOVED, SQLITE_IOERR_SHORT_READ.
_DAMAGE_PRIMARY = {11, 26}
_DAMAGE_EXTENDED = {1032, 522}


class IndexDamaged(sqlite3.DatabaseError):
    """The index's tables contradict each other (damage SQLite itself did not notice)."""


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


# 2: FTS text NFKC-normalised like queries; 3: tag rows carry times; 4: row ids are
# never reused (an updated memory gets a new one), so in-memory postings stay exact.
SCHEMA_VERSION = "4"
_KEPT_COUNTS = 256  # filtered counts kept between writes
_CHUNK = 500  # SQLite host parameters per statement stay well under its limit
_ID_CACHE = 200_000  # row ids → memory ids kept for ranked rows
_WORD_CACHE = 50_000  # query words whose FTS5 terms are remembered
_MMAP_BYTES = 1 << 30
# Rows the writes changed since the last checkpoint of a file index's write-ahead log
# before a write's commit queues the next one. Counted inside writes only (sqlite3's
# total_changes also counts the temporary tables searches fill: counted whole, a search
# or two between single adds queued a checkpoint after nearly every add). A memory
# changes some 30 rows (its row, text, tags, metadata, the scratch tables), so this is
# one checkpoint per bulk batch, or per ~30 single adds.
_CHECKPOINT_CHANGES = 1_000

# Dropped from keyword *queries* only: they match most memories and drown the terms
# that carry the question. Memories keep them, so phrase-like evidence survives.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during
    each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves s t
    don didn doesn isn wasn aren weren
    """.split()  # noqa: SIM905 - a word list reads better as prose
)

# Words as FTS5's unicode61 tokenizer sees them: letters, numbers and private use,
# with the combining accents inside a word (remove_diacritics folds "0\u03010" into
# "00"). Erring towards longer words is safe: FTS5 splits a quoted word into a phrase.
_WORD_CHARS = r"\w\ue000-\uf8ff\U000f0000-\U0010fffd"
_TOKEN = re.compile(rf"[{_WORD_CHARS}][{_WORD_CHARS}\u0300-\u036f]*", re.UNICODE)


def match_query(text: str, *, drop_stopwords: bool = True) -> str | None:
    """An FTS5 MATCH expression for free text: its distinct words OR-ed, each quoted.

    Quoting every word as a string literal means no character of user text can reach
    FTS5's query syntax (``AND``, ``NEAR``, ``*``, ``:``, ``"``, parentheses…).
    Returns None when the text has no words at all.
    """
    return match_expression(query_words(text, drop_stopwords=drop_stopwords))


def match_expression(words: Sequence[str]) -> str | None:
    """``"w1" OR "w2" …`` with every word quoted as an FTS5 string; None for no words."""
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def query_words(text: str, *, drop_stopwords: bool = True) -> list[str]:
    """The distinct words of a query, stopwords dropped unless nothing else is left."""
    # No case folding here: FTS5 folds each quoted word with the same tokenizer as the
    # indexed text, whereas str.casefold() differs from it ("Straße" -> "strasse").
    distinct: dict[str, str] = {}
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
        distinct.setdefault(token.casefold(), token)
    tokens = list(distinct.values())
    if drop_stopwords:
        content = [t for t in tokens if t.casefold() not in STOPWORDS]
        tokens = content or tokens  # a query of only stopwords still searches them
    return tokens


def _row_test(where: Node) -> Callable[[str, str, float, float], bool]:
    """``where`` as a test of a ``memories`` row: its metadata and tags columns (JSON
    text), creation and update times. The columns the filter does not test are not
    decoded."""
    fields = fields_of(where)
    with_tags, with_metadata = TAGS_FIELD in fields, bool(fields - RESERVED_FIELDS)

    def passes(metadata: str, tags: str, created: float, updated: float) -> bool:
        return matches(
            where,
            json.loads(metadata) if with_metadata else {},
            json.loads(tags) if with_tags else (),
            created,
            updated,
        )

    return passes


def _chunks(values: Sequence[Any]) -> Iterator[tuple[list[Any], str]]:
    """``values`` in slices small enough for one statement, each with its ``?, ?, …``."""
    for start in range(0, len(values), _CHUNK):
        chunk = list(values[start : start + _CHUNK])
        yield chunk, ", ".join("?" * len(chunk))


def _fts_text(text: str) -> str:
    """The text as FTS5 indexes it: NFKC-normalised like queries, so "ﬁle", "ＡＢＣ" and
    "x²" are found by the words "file", "ABC" and "x2" and by themselves."""
    return unicodedata.normalize("NFKC", text)


# --- one write of many rows as one statement ------------------------------------------------
#
# A batch of rows travels as JSON text into one INSERT on a view whose trigger fills every
# table: SQLite then does all the work inside one sqlite3_step, which releases the GIL, so
# it can run in a thread while Chroma's add (which holds the GIL) runs on another core. An
# ``executemany`` takes the GIL back for every row.
#
# Floats travel as the integers of their IEEE 754 bits and are rebuilt exactly in SQL
# (significand times a power of two read from a table filled from Python floats): SQLite's
# parsing of decimal text is not correctly rounded on every platform and SQLite version.

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _bits(value: float) -> int:
    """The IEEE 754 bits of a float, as a signed 64-bit integer."""
    return int(_INT64.unpack(_DOUBLE.pack(value))[0])


def _from_bits(bits: str) -> str:
    """SQL for the float whose bits are the integer expression ``bits`` (see :func:`_bits`):
    sign × significand × 2^exponent, each step exact in IEEE 754 (subnormals included)."""
    return (
        f"(CASE WHEN {bits} < 0 THEN -1.0 ELSE 1.0 END"
        f" * (({bits} & 4503599627370495)"
        f" | CASE WHEN ({bits} >> 52) & 2047 = 0 THEN 0 ELSE 4503599627370496 END)"
        " * (SELECT p2_value FROM temp.pow2"
        f" WHERE p2_exponent = max(({bits} >> 52) & 2047, 1) - 1075))"
    )


def _tokens_sql(vocabulary: str) -> str:
    """The tokens in an fts5vocab 'instance' table as one JSON text, ``[[term, …], "size,
    …", "row,row,…"]``: the flat form of :class:`~hybrid_memory.postings.Tokens`. One
    value, so SQLite does all the work in a single step, during which it releases the
    GIL, and Python parses two number lists instead of one per term."""
    return (
        "SELECT json_array(json_group_array(term), group_concat(n), group_concat(rows)) "
        f"FROM (SELECT term, COUNT(*) AS n, group_concat(doc) AS rows FROM {vocabulary} "
        "GROUP BY term)"
    )


def _parse_tokens(text: str) -> Tokens:
    """:func:`_tokens_sql`'s value as :class:`~hybrid_memory.postings.Tokens`."""
    terms, sizes, docs = json.loads(text)
    if not terms:
        empty = np.zeros(0, dtype=np.int64)
        return Tokens([], empty, empty)
    return Tokens(
        terms,
        np.fromstring(sizes, dtype=np.int64, sep=","),
        np.fromstring(docs, dtype=np.int64, sep=","),
    )


# The batch: ``base`` (the first new row id), ``memories`` (a JSON array, one
# ``[id, text, fts text or null, [tags], metadata JSON text, content hash, created bits,
# updated bits]`` per row, row id ``base`` + position), ``meta`` (``[position, key, kind,
# in_array, value, value is float bits]`` per metadata row), ``replaced`` (row ids to
# delete first) and ``tokenise`` (also leave the batch's tokens in ``batch_tokens``, as
# :func:`_tokens_sql` reads them, for the postings).
_BATCH_SCHEMA = f"""
CREATE TEMP TABLE IF NOT EXISTS pow2 (p2_exponent INTEGER PRIMARY KEY, p2_value REAL NOT NULL);
CREATE TEMP TABLE IF NOT EXISTS batch_tokens (tokens TEXT NOT NULL);
CREATE TEMP VIEW IF NOT EXISTS index_batch (base, memories, meta, replaced, tokenise)
    AS SELECT NULL, NULL, NULL, NULL, NULL;
CREATE TEMP TRIGGER IF NOT EXISTS index_batch_write INSTEAD OF INSERT ON index_batch BEGIN
    DELETE FROM batch_tokens;
    DELETE FROM memories_fts WHERE rowid IN (SELECT value FROM json_each(NEW.replaced));
    DELETE FROM memory_tags WHERE rowid IN (SELECT value FROM json_each(NEW.replaced));
    DELETE FROM memory_meta WHERE rowid IN (SELECT value FROM json_each(NEW.replaced));
    DELETE FROM memories WHERE rowid IN (SELECT value FROM json_each(NEW.replaced));
    INSERT OR REPLACE INTO memories
            (rowid, id, text, tags, metadata, content_hash, created_at, updated_at)
        SELECT row, id, text, tags, metadata, hash, {_from_bits("created")}, {_from_bits("updated")}
        FROM (SELECT NEW.base + key AS row, json_extract(value, '$[0]') AS id,
                json_extract(value, '$[1]') AS text, json_extract(value, '$[3]') AS tags,
                json_extract(value, '$[4]') AS metadata, json_extract(value, '$[5]') AS hash,
                json_extract(value, '$[6]') AS created, json_extract(value, '$[7]') AS updated
            FROM json_each(NEW.memories));
    INSERT INTO memories_fts (rowid, text)
        SELECT NEW.base + key, coalesce(json_extract(value, '$[2]'), json_extract(value, '$[1]'))
        FROM json_each(NEW.memories);
    INSERT INTO new_texts (rowid, text)
        SELECT NEW.base + key, coalesce(json_extract(value, '$[2]'), json_extract(value, '$[1]'))
        FROM json_each(NEW.memories) WHERE NEW.tokenise;
    INSERT OR IGNORE INTO memory_tags (tag, rowid, created_at)
        SELECT tag.value, m.rowid, m.created_at
        FROM json_each(NEW.memories) AS r, json_each(r.value, '$[3]') AS tag
        JOIN memories m ON m.rowid = NEW.base + r.key;
    INSERT INTO memory_meta (rowid, key, kind, in_array, value)
        SELECT row, key, kind, in_array, CASE WHEN is_float THEN {_from_bits("raw")} ELSE raw END
        FROM (SELECT NEW.base + json_extract(value, '$[0]') AS row,
                json_extract(value, '$[1]') AS key, json_extract(value, '$[2]') AS kind,
                json_extract(value, '$[3]') AS in_array, json_extract(value, '$[4]') AS raw,
                json_extract(value, '$[5]') AS is_float
            FROM json_each(NEW.meta));
    INSERT INTO batch_tokens (tokens) SELECT * FROM ({_tokens_sql("new_terms")})
        WHERE NEW.tokenise;
    INSERT INTO new_texts (new_texts) SELECT 'delete-all' WHERE NEW.tokenise;
END;
"""


_META_JSON = json.JSONEncoder(sort_keys=True).encode  # json.dumps(…, sort_keys=True)


def _batch_json(rows: Sequence[IndexRow]) -> tuple[str, str] | None:
    """``rows`` as the ``memories`` and ``meta`` JSON of one batch; None when some value
    cannot travel as JSON text (SQLite's JSON cuts a string at NUL; an int beyond 64 bits
    would turn into a float): those batches are written row by row."""
    created = np.array([r.created_at for r in rows], dtype=np.float64).view(np.int64).tolist()
    updated = np.array([r.updated_at for r in rows], dtype=np.float64).view(np.int64).tolist()
    memories: list[tuple[Any, ...]] = []
    meta: list[tuple[Any, ...]] = []
    for position, r in enumerate(rows):
        text = r.text
        fts = _fts_text(text)
        metadata = r.metadata
        memories.append(
            (
                r.id,
                text,
                None if fts == text else fts,
                r.tags,
                _META_JSON(metadata),
                r.content_hash,
                created[position],
                updated[position],
            )
        )
        # metadata_rows(), with floats as their bits
        for key, value in metadata.items():
            values = ((v, 1) for v in value) if isinstance(value, list) else ((value, 0),)
            for v, in_array in values:
                t = type(v)
                if t is str:
                    meta.append((position, key, "s", in_array, v, 0))
                elif t is float:
                    meta.append((position, key, "n", in_array, _bits(v), 1))
                else:
                    kind = kind_of(v)
                    if kind == "n" and isinstance(v, float):
                        meta.append((position, key, kind, in_array, _bits(v), 1))
                        continue
                    if kind == "n" and not _INT64_MIN <= v <= _INT64_MAX:
                        return None
                    meta.append((position, key, kind, in_array, int(v) if kind == "b" else v, 0))
    out = (json.dumps(memories, ensure_ascii=False), json.dumps(meta, ensure_ascii=False))
    # json.dumps writes NUL as \u0000 (a text holding a backslash before "u0000" also
    # matches: that batch merely takes the slower way).
    if any("\\u0000" in part for part in out):
        return None
    return out


@dataclass(frozen=True, slots=True)
class _Batch:
    """One write: its rows (distinct ids) get row ids ``base``, ``base`` + 1, …"""

    rows: list[IndexRow]
    payload: tuple[str, str] | None  # from _batch_json; None: row by row
    replaced: list[int]
    base: int
    tokenise: bool  # the postings exist: fill the scratch table they are extended from

    def rowids(self) -> range:
        return range(self.base, self.base + len(self.rows))


class TagMatch(NamedTuple):
    """A memory carrying matched tags, as the tag leg ranks it."""

    id: str
    matched: int  # how many of the asked tags it carries
    created_at: float
    row: int  # index row number: breaks ties, lower first


def tag_order(match: TagMatch) -> tuple[int, float, int]:
    """The tag leg's order: most matched tags first, then newest, then index row."""
    return (-match.matched, -match.created_at, match.row)


class KeywordIndex:
    """SQLite tables: ``memories`` (one row per memory), ``memories_fts`` (FTS5 over
    the text), ``memory_tags`` and ``memory_meta`` (for tag matches and filters).

    ``path=None`` keeps the index in memory. One connection serves all threads,
    guarded by a lock; each call is one transaction.
    """

    def __init__(self, path: str | None, tokenizer: str) -> None:
        self.path = path
        self.tokenizer = tokenizer
        self._lock = threading.RLock()
        # Runs writes beside Chroma's, and checkpoints: one job at a time.
        self._pool: ThreadPoolExecutor | None = None
        self._checkpoint: Future[None] | None = None  # the last one queued
        self.repairs = 0  # times a damaged file was found and started over
        with self._repairing():
            self._connect_or_start_over()

    def reset(self, cause: BaseException) -> None:
        """After ``cause`` (a damage error, :func:`is_damage`) from this index: reopen the
        file, starting it over empty when it is still damaged (another process may have
        rebuilt it meanwhile). The caller refills it from the collection."""
        with self._lock, self._repairing():
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            self._checkpoint = None
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            if self._file_id() == self._opened:
                # Still the file this connection found damaged: start it over. (Another
                # process that found it damaged first replaced it: that one is opened.)
                self._start_over(cause)
                return
            if self._connect_or_start_over():
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

    @contextlib.contextmanager
    def _repairing(self) -> Iterator[None]:
        """Opening (and any start over) under an exclusive lock on ``<path>.lock``, so
        that one process at a time checks and replaces the file."""
        if not self.path or fcntl is None:
            yield
            return
        with open(self.path + ".lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _connect_or_start_over(self) -> bool:
        """Open the file; start it over empty if SQLite finds it damaged. True when the
        file opened as it was."""
        try:
            self._connect()
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
        self.repairs += 1
        with contextlib.suppress(sqlite3.Error, AttributeError):
            self._conn.close()
        if self.path:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path + suffix)
        self._connect()

    def _connect(self) -> None:
        """Open the file (creating the schema) and probe that its tables can be read;
        sqlite3.DatabaseError when they cannot."""
        path = self.path
        if path and (not os.path.exists(path) or os.path.getsize(path) == 0):
            # No database file (or an empty one) beside a write-ahead log: the file was
            # deleted or emptied while another connection used it, and that log (and its
            # shared-memory index) belong to the old file: read with a new one, they
            # would make a chimera of both.
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + suffix)
        self._conn = sqlite3.connect(
            path or ":memory:", check_same_thread=False, isolation_level=None
        )
        self._opened = self._file_id()
        try:
            self._open_tables()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            raise

    def _open_tables(self) -> None:
        path = self.path
        if path:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            # Filters and id lookups jump around the tables: read them through the
            # page cache of the OS instead of SQLite's 2 MB one.
            self._conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
            # SQLite's own checkpoint runs inside the COMMIT that fills the log past 1,000
            # pages, on the writer's thread (2.3 s of 97 in an ingest of 100,000 memories):
            # the index queues its own instead (:meth:`_checkpoint_soon`).
            self._conn.execute("PRAGMA wal_autocheckpoint=0")
        # Counts by filter statement (no filter: "") since the last write; search asks.
        self._counts: dict[tuple[str, tuple[Any, ...]], int] = {}
        # Ranking arrays (None: built by the next search). Tokenizers that turn a word
        # into several tokens (trigram) make every query word a phrase: FTS5 ranks those.
        self._postings: Postings | None = None
        self._fast = not self.tokenizer.split()[0].lower().startswith("trigram")
        self._word_terms: dict[str, tuple[str, ...]] = {}
        # Memory ids of ranked rows. A row id is never given to another memory (see
        # _next_rowid), so entries stay true until a rebuild renumbers the rows, which
        # builds new postings: the cache is emptied with each build.
        self._row_ids: dict[int, str] = {}
        # The other way round, for the ids of those rows: an update gives a memory a new
        # row id, so entries leave with this connection's writes and all of them when
        # another connection wrote.
        self._id_rows: dict[str, int] = {}
        # The carriers of recently matched tags (the tag leg's counts), kept in step with
        # this connection's writes and emptied when another connection wrote.
        self._carriers = TagCarriers()
        self.rebuilt_schema = self._ensure_schema()
        self._data_version = self._version()
        # Every table read once: a damaged file fails here, on open, rather than in a
        # search (damage the probes miss is caught there: see HybridMemory._guarded).
        self._conn.execute("SELECT count(*), max(updated_at) FROM memories").fetchone()
        for table in ("memory_meta", "memory_tags", "memories_vocab", "memories_fts"):
            self._conn.execute(f"SELECT * FROM {table} LIMIT 1").fetchall()
        if self._fast and self._conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is None:
            # Nothing to build from: the postings start empty and follow every write, so a
            # store filled from scratch has them when its first search comes.
            self._postings = Postings()
        self._changes_written = 0  # by writes, since the last checkpoint
        self._write_started = 0  # total_changes when the current write began

    # --- schema ---------------------------------------------------------------------

    def _ensure_schema(self) -> bool:
        """Create the tables; recreate them when the schema or tokenizer changed.
        Returns True when the index was (re)created empty and must be filled."""
        with self._lock:
            c = self._conn
            c.execute("CREATE TABLE IF NOT EXISTS index_state (key TEXT PRIMARY KEY, value TEXT)")
            stored = dict(c.execute("SELECT key, value FROM index_state").fetchall())
            fresh = stored.get("schema") != SCHEMA_VERSION or stored.get("tokenizer") != (
                self.tokenizer
            )
            if fresh:
                for table in (
                    "memories",
                    "memories_vocab",
                    "memories_fts",
                    "memory_tags",
                    "memory_meta",
                ):
                    c.execute(f"DROP TABLE IF EXISTS {table}")
                c.execute("DELETE FROM index_state")
            c.executescript(
                """
                CREATE TABLE IF NOT EXISTS memories (
                    rowid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
                    text TEXT NOT NULL,
                    tags TEXT NOT NULL, metadata TEXT NOT NULL, content_hash TEXT NOT NULL,
                    created_at REAL NOT NULL, updated_at REAL NOT NULL);
                CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash);
                CREATE INDEX IF NOT EXISTS memories_updated ON memories(updated_at);
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
                """
            )
            tokenize = self.tokenizer.replace("'", "''")
            try:
                c.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts "
                    f"USING fts5(text, tokenize='{tokenize}')"
                )
            except sqlite3.OperationalError as exc:
                from hybrid_memory.errors import InvalidInputError

                raise InvalidInputError(
                    "HYBRID_MEMORY_KEYWORD_TOKENIZER (keyword_tokenizer)",
                    f"SQLite FTS5 rejected tokenizer {self.tokenizer!r}: {exc}; examples: "
                    "'porter unicode61 remove_diacritics 2', 'unicode61', 'trigram'",
                ) from exc
            c.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS memories_vocab "
                "USING fts5vocab(memories_fts, 'row')"
            )
            c.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words "
                f"USING fts5(word, tokenize='{tokenize}')"
            )
            c.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_terms "
                "USING fts5vocab('temp', 'query_words', 'instance')"
            )
            # Every token of every indexed memory, in (term, row, offset) order: what
            # the in-memory postings are built from.
            c.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_terms "
                "USING fts5vocab('main', 'memories_fts', 'instance')"
            )
            # A scratch copy with the same tokenizer, to read the tokens of new rows.
            c.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.new_texts "
                f"USING fts5(text, content='', tokenize='{tokenize}')"  # emptied at once
            )
            c.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.new_terms "
                "USING fts5vocab('temp', 'new_texts', 'instance')"
            )
            c.executescript(_BATCH_SCHEMA)
            c.executemany(
                "INSERT OR IGNORE INTO temp.pow2 VALUES (?, ?)",
                [(e, math.ldexp(1.0, e)) for e in range(-1074, 1024)],
            )
            c.executemany(
                "INSERT OR REPLACE INTO index_state VALUES (?, ?)",
                [("schema", SCHEMA_VERSION), ("tokenizer", self.tokenizer)],
            )
            return fresh

    def get_state(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM index_state WHERE key = ?", (key,)
            ).fetchone()
            return row[0] if row else None

    def set_state(self, key: str, value: str) -> None:
        with self._writing() as c:
            c.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?)", (key, value))
            self._checkpoint_soon()

    # --- writes -------------------------------------------------------------------------

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Insert or replace memories by id, in one transaction. A replaced memory gets
        a new row id (row ids are never reused)."""
        with self.upserting(rows, overlap=False):
            pass

    @contextlib.contextmanager
    def upserting(self, rows: Sequence[IndexRow], *, overlap: bool = True) -> Iterator[None]:
        """:meth:`upsert` ``rows`` around the body: the rows are written in an open
        transaction, committed when the body returns and rolled back when it raises, and
        the in-memory postings follow only once committed.

        With ``overlap``, the write runs in this index's worker thread while the body
        runs: one SQL statement, during which SQLite releases the GIL, so it costs
        nothing extra beside a Chroma write (which holds the GIL). The body must not use
        this index (other threads wait for the lock until the commit)."""
        if not rows:
            yield
            return
        latest = list({r.id: r for r in rows}.values())  # a repeated id: the last one wins
        payload = _batch_json(latest)
        with self._writing() as c:
            c.execute("BEGIN IMMEDIATE")
            self._counts.clear()
            try:
                self._catch_up()
                batch = _Batch(
                    latest,
                    payload,
                    list(self._rowids([r.id for r in latest]).values()),
                    self._next_rowid(),
                    self._postings is not None,
                )
                if overlap:
                    started = threading.Event()
                    future = self._worker().submit(self._write_batch, batch, started)
                    started.wait()  # the statement is under way: the body may take the GIL
                    try:
                        yield
                    finally:
                        wait([future])  # the connection is free again, either way
                    tokens = future.result()
                else:
                    tokens = self._write_batch(batch)
                    yield
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            self._follow(batch, tokens)
            self._follow_tags(batch)
            self._checkpoint_soon()

    def _worker(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="hybrid-memory-index")
        return self._pool

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock, for a write that starts after the checkpoint
        the last write queued has finished: it is waited for outside the lock, which the
        checkpoint takes. SQLite then starts the log over from its beginning (unless
        another connection still reads it), as after its own checkpoint in the commit: the
        log stays within the largest transaction plus :data:`_CHECKPOINT_CHANGES` rows'
        worth, whatever the threads' timing. The checkpoint overlaps the caller's work
        between writes (the next batch's rows and JSON), not the next write."""
        while True:
            pending = self._checkpoint
            if pending is not None:
                wait([pending])
            self._lock.acquire()
            if self._checkpoint is None or self._checkpoint.done():
                break
            self._lock.release()  # another thread's write queued one meanwhile
        try:
            self._write_started = self._conn.total_changes
            finished, self._checkpoint = self._checkpoint, None
            if finished is not None:
                finished.result()  # anything but an sqlite3.Error (a bug) is raised once
            yield self._conn
        finally:
            self._lock.release()

    def _checkpoint_soon(self) -> None:
        """After a write's commit, under the lock: queue a checkpoint of a file index's
        write-ahead log once writes changed :data:`_CHECKPOINT_CHANGES` rows since the last."""
        changes = self._conn.total_changes
        self._changes_written += changes - self._write_started
        self._write_started = changes
        if not self.path or self._changes_written < _CHECKPOINT_CHANGES:
            return
        self._changes_written = 0
        self._checkpoint = self._worker().submit(self._run_checkpoint)

    def _run_checkpoint(self) -> None:
        """Copy the write-ahead log into the database file, in the worker thread. PASSIVE
        waits for no one; what it cannot copy (a reader on another connection still needs
        it, or that connection holds a lock: sqlite3.Error) the next checkpoint copies,
        so a failure here is harmless and is dropped rather than raised in a later write."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _write_batch(self, batch: _Batch, started: threading.Event | None = None) -> str | None:
        """The rows of ``batch`` into every table, inside the caller's transaction.

        When the postings exist, also the batch's tokens for them (:func:`_tokens_sql`),
        for :meth:`_follow`. The batch statement tokenises and groups them itself: every
        statement ends by taking the GIL back, which Chroma holds through its write, so
        work in a statement of its own would wait for the end of Chroma's write (the
        grouping and clearing cost ~2.5 s per 100,000 memories there)."""
        if started is not None:
            started.set()
        c = self._conn
        if batch.payload is not None:
            memories, meta = batch.payload
            c.execute(
                "INSERT INTO temp.index_batch VALUES (?, ?, ?, ?, ?)",
                (batch.base, memories, meta, json.dumps(batch.replaced), int(batch.tokenise)),
            )
            if not batch.tokenise:
                return None
            tokens: str = c.execute("SELECT tokens FROM temp.batch_tokens").fetchone()[0]
            return tokens
        self._write_rows(batch)
        return self._take_new_tokens() if batch.tokenise else None

    def _take_new_tokens(self) -> str:
        """The tokens of the rows in the scratch table ``new_texts`` (:func:`_tokens_sql`),
        which is left empty."""
        c = self._conn
        try:
            tokens: str = c.execute(_tokens_sql("temp.new_terms")).fetchone()[0]
        finally:
            c.execute("INSERT INTO temp.new_texts (new_texts) VALUES ('delete-all')")
        return tokens

    def _write_rows(self, batch: _Batch) -> None:
        """The row-by-row form of the batch statement (for values JSON cannot carry)."""
        c = self._conn
        self._delete_rowids(batch.replaced, keep_memories=False)
        pairs = list(zip(batch.rowids(), batch.rows, strict=True))
        c.executemany(
            "INSERT OR REPLACE INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    rowid,
                    r.id,
                    r.text,
                    json.dumps(list(r.tags)),
                    json.dumps(r.metadata, sort_keys=True),
                    r.content_hash,
                    r.created_at,
                    r.updated_at,
                )
                for rowid, r in pairs
            ],
        )
        texts = [(rowid, _fts_text(r.text)) for rowid, r in pairs]
        c.executemany("INSERT INTO memories_fts(rowid, text) VALUES (?, ?)", texts)
        if batch.tokenise:
            c.executemany("INSERT INTO temp.new_texts(rowid, text) VALUES (?, ?)", texts)
        c.executemany(
            "INSERT OR IGNORE INTO memory_tags VALUES (?, ?, ?)",
            [(tag, rowid, r.created_at) for rowid, r in pairs for tag in r.tags],
        )
        c.executemany(
            "INSERT INTO memory_meta VALUES (?, ?, ?, ?, ?)",
            [
                (rowid, key, kind, in_array, value)
                for rowid, r in pairs
                for key, kind, in_array, value in metadata_rows(r.metadata)
            ],
        )

    def _follow(self, batch: _Batch, tokens: str | None) -> None:
        """Bring the postings in step with a committed batch: replaced rows out, the new
        ones in, from the batch's ``tokens`` (:meth:`_write_batch`). Should that fail,
        the postings are dropped and rebuilt by the next search: the write itself stands."""
        if tokens is None or self._postings is None:
            return
        try:
            self._postings.remove(batch.replaced)
            rowids = np.arange(batch.base, batch.base + len(batch.rows), dtype=np.int64)
            self._postings.add(rowids, _parse_tokens(tokens))
        except Exception:
            self._postings = None

    def _follow_tags(self, batch: _Batch) -> None:
        """Bring the held tag carriers in step with a committed batch."""
        self._forget(batch.replaced, [r.id for r in batch.rows])
        try:
            self._carriers.add(
                batch.rowids(), [r.tags for r in batch.rows], [r.created_at for r in batch.rows]
            )
        except Exception:
            self._carriers.clear()  # read again when next asked for

    def _forget(self, rowids: Sequence[int], ids: Iterable[str]) -> None:
        """After a commit: rows gone from the index leave the held tag carriers, and the
        memories written or deleted leave the ids known to their rows."""
        for memory_id in ids:
            self._id_rows.pop(memory_id, None)
        try:
            self._carriers.remove(rowids)
        except Exception:
            self._carriers.clear()  # read again when next asked for

    def delete(self, ids: Iterable[str]) -> int:
        """Remove memories by id; returns how many were present."""
        with self._writing() as c:
            c.execute("BEGIN IMMEDIATE")
            self._counts.clear()
            try:
                self._catch_up()
                found = self._rowids(list(ids))
                rowids = list(found.values())
                self._delete_rowids(rowids, keep_memories=False)
                if self._postings is not None:
                    self._postings.remove(rowids)
                c.execute("COMMIT")
            except BaseException:
                self._postings = None
                c.execute("ROLLBACK")
                raise
            self._forget(rowids, found)
            self._checkpoint_soon()
            return len(rowids)

    def clear(self) -> None:
        with self._writing() as c:
            self._counts.clear()
            for table in ("memories", "memories_fts", "memory_tags", "memory_meta"):
                c.execute(f"DELETE FROM {table}")
            self._postings = Postings() if self._fast else None  # empty, as the index
            self._carriers.clear()
            self._id_rows.clear()
            self._checkpoint_soon()

    def _delete_rowids(self, rowids: list[int], *, keep_memories: bool) -> None:
        tables = ["memories_fts", "memory_tags", "memory_meta"]
        if not keep_memories:
            tables.append("memories")
        for table in tables:
            self._conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r,) for r in rowids])

    def _next_rowid(self) -> int:
        """One above every row id this table ever had (deleted ones included)."""
        c = self._conn
        used = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
        highest = c.execute("SELECT MAX(rowid) FROM memories").fetchone()[0]
        return max(used[0] if used else 0, highest or 0) + 1

    # --- the in-memory postings -------------------------------------------------------

    def _version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _catch_up(self) -> None:
        """Bring the postings and the held tag carriers in step with rows other
        connections wrote (another process sharing this index file): new rows added,
        vanished rows removed."""
        version = self._version()
        if version == self._data_version:
            return
        self._data_version = version
        self._counts.clear()
        self._id_rows.clear()
        postings = self._postings
        if postings is None:
            self._carriers.clear()  # read again when next asked for
            return
        present = self._all_rowids()
        known = postings.live_rowids()
        gone = np.setdiff1d(known, present, assume_unique=True).tolist()
        postings.remove(gone)
        new = np.setdiff1d(present, known, assume_unique=True)
        if len(new) and int(new.min()) <= postings.high:
            self._postings = None  # rows renumbered behind our back: rebuild
            self._carriers.clear()
            return
        if self._carriers:
            try:
                self._carriers.remove(gone)
                self._carriers.add_rows(
                    self._conn.execute(
                        "SELECT rowid, tag, created_at FROM memory_tags WHERE rowid > ?",
                        (postings.high,),
                    ).fetchall()
                )
            except Exception:
                self._carriers.clear()  # read again when next asked for
        if len(new):
            self._extend_postings(
                self._conn.execute(
                    "SELECT rowid, text FROM memories WHERE rowid > ?", (postings.high,)
                ).fetchall()
            )

    def _extend_postings(self, rows: Sequence[tuple[int, str]]) -> None:
        """Add rows to the postings, tokenised by a scratch FTS5 table with the index's
        own tokenizer."""
        if self._postings is None or not rows:
            return
        self._conn.executemany(
            "INSERT INTO temp.new_texts(rowid, text) VALUES (?, ?)",
            [(rowid, _fts_text(text)) for rowid, text in rows],
        )
        tokens = _parse_tokens(self._take_new_tokens())
        self._postings.add(np.array([r for r, _ in rows], dtype=np.int64), tokens)

    def _all_rowids(self) -> IntArray:
        return np.array(
            [r[0] for r in self._conn.execute("SELECT rowid FROM memories")], dtype=np.int64
        )

    def _tokens(self, vocabulary: str) -> Tokens:
        """The tokens in an fts5vocab 'instance' table."""
        return _parse_tokens(self._conn.execute(_tokens_sql(vocabulary)).fetchone()[0])

    def _ready_postings(self) -> Postings:
        """The postings, built from the FTS5 index when there are none yet (about a
        second per 100,000 memories; once per open store)."""
        self._catch_up()
        if self._postings is None:
            self._row_ids.clear()
            self._id_rows.clear()
            postings = Postings()
            postings.add(self._all_rowids(), self._tokens("temp.memory_terms"))
            self._postings = postings
        return self._postings

    def _query_terms(self, words: Sequence[str]) -> list[tuple[str, ...]] | None:
        """Each word's FTS5 terms; None when some word is several tokens (FTS5 reads
        it as a phrase, the postings cannot)."""
        out = self._terms_of(words)
        return None if any(len(t) > 1 for t in out) else out

    def _terms_of(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's FTS5 terms, as the index's own tokenizer makes them (a scratch
        FTS5 table tokenises the words; remembered for the next queries)."""
        missing = [w for w in words if w not in self._word_terms]
        if missing:
            if len(self._word_terms) > _WORD_CACHE:
                self._word_terms.clear()
            c = self._conn
            c.executemany(
                "INSERT INTO temp.query_words(rowid, word) VALUES (?, ?)", enumerate(missing)
            )
            try:
                found = c.execute(
                    "SELECT doc, term FROM temp.query_terms ORDER BY doc, offset"
                ).fetchall()
            finally:
                c.execute("DELETE FROM temp.query_words")
            terms: dict[int, list[str]] = {}
            for doc, term in found:
                terms.setdefault(doc, []).append(term)
            for i, word in enumerate(missing):
                self._word_terms[word] = tuple(terms.get(i, ()))
        return [self._word_terms[w] for w in words]

    def _rowids(self, ids: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for chunk, marks in _chunks(ids):
            found.update(
                self._conn.execute(
                    f"SELECT id, rowid FROM memories WHERE id IN ({marks})", chunk
                ).fetchall()
            )
        return found

    # --- reads --------------------------------------------------------------------------

    def count(self, where: Node | None = None) -> int:
        """Memories passing ``where``. Counts are kept between writes: search asks for
        them every time, and COUNT(*) scans the table or the filter's rows."""
        sql, params = to_sql(where)
        key = (sql, tuple(params))  # the statement decides the count
        with self._lock:
            self._catch_up()  # another connection's write changes the counts
            known = self._counts.get(key)
            if known is not None:
                return known
            query = "SELECT COUNT(*) FROM memories m" + (f" WHERE {sql}" if sql else "")
            total = int(self._conn.execute(query, params).fetchone()[0])
            if len(self._counts) >= _KEPT_COUNTS:
                self._counts.clear()
            self._counts[key] = total
            return total

    def passing(self, ids: Sequence[str], where: Node | None) -> set[str]:
        """Which of ``ids`` are indexed and pass ``where``."""
        with self._lock:
            return self._passing("id", list(ids), where)

    def _passing(self, key: str, values: list[Any], where: Node | None) -> set[Any]:
        """The ``key`` (``id`` or ``rowid``) of the rows among ``values`` that pass
        ``where``, checked in Python on just those rows: the filter's SQL form has
        SQLite first collect every memory passing each of its conditions (55 ms for a
        few hundred rows and three common tags at 100,000 memories, against ~1 ms)."""
        query = (
            f"SELECT {key}, tags, metadata, created_at, updated_at FROM memories "
            f"WHERE {key} IN (SELECT value FROM json_each(?))"
        )
        rows = self._conn.execute(query, [json.dumps(values)])
        if where is None:
            return {r[0] for r in rows}
        passes = _row_test(where)
        return {
            value
            for value, tags, metadata, created, updated in rows
            if passes(metadata, tags, created, updated)
        }

    def ids(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT id FROM memories")}

    def existing(self, ids: Sequence[str]) -> set[str]:
        with self._lock:
            return set(self._rowids(list(ids)))

    def watermark(self) -> float | None:
        """The newest ``updated_at`` indexed: where catching up with the collection starts."""
        with self._lock:
            value = self._conn.execute("SELECT MAX(updated_at) FROM memories").fetchone()[0]
            return None if value is None else float(value)

    def single_valued(self, fields: Iterable[str]) -> list[str]:
        """Of ``fields``, those some memory holds and none holds as a list."""
        out: list[str] = []
        query = "SELECT 1 FROM memory_meta WHERE key = ? AND kind = ? AND in_array = ? LIMIT 1"
        with self._lock:
            for name in fields:

                def held(in_array: int, name: str = name) -> bool:
                    return any(
                        self._conn.execute(query, (name, kind, in_array)).fetchone()
                        for kind in "bns"
                    )

                if held(0) and not held(1):
                    out.append(name)
        return out

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        """For each content hash already stored, one memory id that has it."""
        out: dict[str, str] = {}
        with self._lock:
            for chunk, marks in _chunks(hashes):
                for content_hash, memory_id in self._conn.execute(
                    f"SELECT content_hash, MIN(id) FROM memories WHERE content_hash IN ({marks}) "
                    "GROUP BY content_hash",
                    chunk,
                ):
                    out[content_hash] = memory_id
        return out

    def all_tags(self) -> list[str]:
        """Every tag in use, sorted. A skip-scan: one index seek per distinct tag (SQLite
        walks every tag row for ``SELECT DISTINCT``: 10 ms at 100,000 memories, against
        0.1 ms for their 38 tags this way)."""
        with self._lock:
            return [
                r[0]
                for r in self._conn.execute(
                    "WITH RECURSIVE t(tag) AS (SELECT MIN(tag) FROM memory_tags UNION ALL "
                    "SELECT (SELECT MIN(tag) FROM memory_tags WHERE tag > t.tag) FROM t "
                    "WHERE t.tag IS NOT NULL) SELECT tag FROM t WHERE tag IS NOT NULL"
                )
            ]

    def page(self, where: Node | None, limit: int | None, offset: int) -> list[str]:
        """The ids of the memories passing ``where``, oldest first (``created_at``, then
        ``id``, so that the order is the same in every process), ``offset`` skipped and at
        most ``limit`` (None: all)."""
        sql, params = to_sql(where)
        query = (
            "SELECT m.id FROM memories m"
            + (f" WHERE {sql}" if sql else "")
            + " ORDER BY m.created_at, m.id LIMIT ? OFFSET ?"
        )
        with self._lock:
            self._catch_up()
            rows = self._conn.execute(
                query, [*params, -1 if limit is None else limit, offset]
            ).fetchall()
        return [r[0] for r in rows]

    def within(self, where: Node | None, cap: int) -> tuple[IntArray, list[str]] | None:
        """The row ids and ids of the memories passing ``where``, when there are at most
        ``cap`` of them (None otherwise): a narrow filter resolved once, for every leg."""
        sql, params = to_sql(where)
        query = "SELECT m.rowid, m.id FROM memories m" + (f" WHERE {sql}" if sql else "")
        with self._lock:
            rows = self._conn.execute(query + " LIMIT ?", [*params, cap + 1]).fetchall()
        if len(rows) > cap:
            return None
        return np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows]

    def search(
        self,
        text: str,
        limit: int,
        where: Node | None = None,
        *,
        within: IntArray | None = None,
        drop_stopwords: bool = True,
        max_df: float = 1.0,
    ) -> list[tuple[str, float]]:
        """The ``limit`` best BM25 matches for free text among memories passing ``where``:
        ``[(id, bm25 score)]``, best first (equal scores oldest row first), scores
        positive. ``within``: the row ids passing ``where``, when already known
        (:meth:`within`).

        Query words found in more than ``max_df`` of all memories are left out (unless
        that would leave none): they weigh little in BM25 and match the most rows."""
        words = query_words(text, drop_stopwords=drop_stopwords)
        if max_df < 1.0 and len(words) > 1:
            common = self._common_words(words, max_df)
            words = [w for w in words if w not in common] or words
        if not words:
            return []
        with self._lock:
            terms = self._query_terms(words) if self._fast else None
            if terms is None:
                return self._search_fts(words, limit, where)
            postings = self._ready_postings()
            rows, scores = postings.scores([t[0] for t in terms if t])
            if within is not None:
                keep = np.isin(rows, within)
                rows, scores = best_first(rows[keep], scores[keep], limit)
            elif where is not None:
                rows, scores = self._passing_best(rows, scores, limit, where)
            else:
                rows, scores = best_first(rows, scores, limit)
            ids = self._ids_of(rows.tolist())
            if len(ids) < len(rows):
                raise IndexDamaged("ranked rows are missing from the memories table")
            return [(ids[r], float(v)) for r, v in zip(rows.tolist(), scores, strict=True)]

    def _passing_best(
        self, rows: IntArray, scores: FloatArray, limit: int, where: Node
    ) -> tuple[IntArray, FloatArray]:
        """The ``limit`` best of the scored rows that pass the filter: candidates are
        checked best first in growing batches, so a broad filter costs one query and a
        narrow one a few."""
        order = np.lexsort((rows, -scores))
        rows, scores = rows[order], scores[order]
        kept: list[int] = []
        start, step = 0, max(4 * limit, 256)
        while start < len(rows) and len(kept) < limit:
            batch = rows[start : start + step]
            passing = self._passing("rowid", batch.tolist(), where)
            kept.extend(start + i for i, r in enumerate(batch.tolist()) if r in passing)
            start += step
            step *= 2
        chosen = np.array(kept[:limit], dtype=np.int64)
        return rows[chosen], scores[chosen]

    def _ids_of(self, rowids: list[int]) -> dict[int, str]:
        known = self._row_ids
        missing = [r for r in rowids if r not in known]
        if missing:
            if len(known) + len(missing) > _ID_CACHE:
                known.clear()
                self._id_rows.clear()
            found = self._conn.execute(
                "SELECT rowid, id FROM memories WHERE rowid IN (SELECT value FROM json_each(?))",
                [json.dumps(missing)],
            ).fetchall()
            known.update(found)
            self._id_rows.update((memory_id, row) for row, memory_id in found)
        return {r: known[r] for r in rowids if r in known}

    def _current_rowids(self, ids: Sequence[str]) -> dict[str, int]:
        """:meth:`_rowids` for reads: the ids of rows seen lately are known without SQL."""
        known = self._id_rows
        found = {i: known[i] for i in ids if i in known}
        if len(found) < len(ids):
            found.update(self._rowids([i for i in ids if i not in found]))
        return found

    def _search_fts(
        self, words: Sequence[str], limit: int, where: Node | None
    ) -> list[tuple[str, float]]:
        """FTS5's own ranking: for query words it reads as phrases."""
        expression = match_expression(words)
        if expression is None:
            return []
        sql, params = to_sql(where)
        query = (
            "SELECT m.id, -bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories m ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ?"
            + (f" AND {sql}" if sql else "")
            + " ORDER BY bm25(memories_fts), m.rowid LIMIT ?"
        )
        return [
            (r[0], float(r[1])) for r in self._conn.execute(query, [expression, *params, limit])
        ]

    def _common_words(self, words: Sequence[str], max_df: float) -> set[str]:
        """The words whose indexed term (as the index's own tokenizer stems it) occurs in
        more than ``max_df`` of the memories."""
        with self._lock:
            total = self.count()
            if total == 0:
                return set()
            terms = self._terms_of(words)
            distinct = sorted({t for word_terms in terms for t in word_terms})
            if not distinct:
                return set()
            marks = ", ".join("?" * len(distinct))
            frequency = dict(
                self._conn.execute(
                    f"SELECT term, doc FROM memories_vocab WHERE term IN ({marks})", distinct
                ).fetchall()
            )
        limit = max_df * total
        return {
            word
            for word, word_terms in zip(words, terms, strict=True)
            if any(frequency.get(t, 0) > limit for t in word_terms)
        }

    def tag_matches(
        self,
        tags: Sequence[str],
        limit: int,
        where: Node | None = None,
        among: Sequence[str] | None = None,
    ) -> list[tuple[str, int, float]]:
        """Memories carrying any of ``tags`` (and passing ``where``): ``[(id, tags
        matched, created_at)]``, most matched tags first, then newest first.

        With ``among``, only those ids are considered. Without it, each tag contributes
        its ``limit`` newest carriers, read in index order: a common tag can sit on a
        large share of the store, and counting all its carriers on every search would
        grow with the store. (Carriers found by the other legs are asked for through
        ``among``, so none of those is missed.)"""
        return [
            (m.id, m.matched, m.created_at) for m in self.tag_carriers(tags, limit, where, among)
        ]

    def tag_carriers(
        self,
        tags: Sequence[str],
        limit: int,
        where: Node | None = None,
        among: Sequence[str] | None = None,
        *,
        within: IntArray | None = None,
    ) -> list[TagMatch]:
        """:meth:`tag_matches` with each memory's index row number, which orders ties
        (equal count and creation time: lower row first), so that carriers read in
        separate calls can be merged in exactly the order one call would give.

        ``within``: the row ids passing ``where``, when already known (:meth:`within`);
        carriers are then checked against them instead of the filter's SQL, which SQLite
        evaluates afresh for every tag (6 ms a tag for one user's 2,000 memories of
        100,000, against 2 ms).

        Without a filter (or with ``within``) the counts come from the carriers of each
        tag held in memory (:class:`~hybrid_memory.carriers.TagCarriers`), read once
        and kept in step with writes."""
        if not tags or (among is not None and not among):
            return []
        with self._lock:
            self._catch_up()
            if among is not None:
                ids = list(dict.fromkeys(among))
                if where is None or within is not None:
                    found = self._held_counts(ids, tags, within)
                else:
                    found = self._tag_counts(ids, tags, where)
            elif where is None or within is not None:
                found = self._held_newest(tags, limit, within)
            else:
                found = self._newest_carriers(tags, limit, where)
        found.sort(key=tag_order)
        return found[:limit]

    def _hold(self, tags: Sequence[str]) -> None:
        """Read the carriers of those of ``tags`` not held yet: when none are held and
        every tag's fit in half the capacity, all of them in one pass (~0.2 s for the
        220,000 tag rows of 100,000 memories; one tag at a time, a search met a ~10 ms
        read for each tag it was the first to match), else tag by tag."""
        missing = self._carriers.missing(tags)
        if not missing:
            return
        if not self._carriers:
            (total,) = self._conn.execute("SELECT COUNT(*) FROM memory_tags").fetchone()
            if total <= CAPACITY // 2:
                every = self._conn.execute(
                    "SELECT tag, rowid, created_at FROM memory_tags ORDER BY tag, rowid"
                )
                for tag, carriers in itertools.groupby(every, key=itemgetter(0)):
                    self._put_carriers(tag, list(carriers), tags)
                missing = self._carriers.missing(missing)  # tags nobody carries
        for tag in missing:
            self._put_carriers(
                tag,
                self._conn.execute(
                    "SELECT tag, rowid, created_at FROM memory_tags WHERE tag = ? ORDER BY rowid",
                    (tag,),
                ).fetchall(),
                tags,
            )

    def _put_carriers(
        self, tag: str, rows: Sequence[tuple[str, int, float]], asked: Sequence[str]
    ) -> None:
        self._carriers.put(
            tag,
            np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2] for r in rows], dtype=np.float64),
            keep=asked,
        )

    def _held_newest(
        self, tags: Sequence[str], limit: int, within: IntArray | None
    ) -> list[TagMatch]:
        """Each tag's ``limit`` newest carriers (among the row ids ``within``), from the
        held carriers, with how many of ``tags`` each carries."""
        self._hold(tags)
        carriers: dict[int, float] = {}
        for tag in tags:
            rows, created = self._carriers.newest(tag, limit, within)
            carriers.update(zip(rows.tolist(), created.tolist(), strict=True))
        rowids = list(carriers)
        counts = self._carriers.counts(np.array(rowids, dtype=np.int64), tags)[0].tolist()
        ids = self._ids_of(rowids)
        return [
            TagMatch(ids[r], count, carriers[r], r)
            for r, count in zip(rowids, counts, strict=True)
            if r in ids
        ]

    def _held_counts(
        self, ids: Sequence[str], tags: Sequence[str], within: IntArray | None
    ) -> list[TagMatch]:
        """How many of ``tags`` each of the memories ``ids`` (of the row ids ``within``)
        carries, those carrying none left out, from the held carriers."""
        self._hold(tags)
        rowids = self._current_rowids(ids)
        rows = np.fromiter(rowids.values(), dtype=np.int64, count=len(rowids))
        matched, created = self._carriers.counts(rows, tags)
        if within is not None:
            matched[~np.isin(rows, within)] = 0
        return [
            TagMatch(memory_id, count, when, row)
            for (memory_id, row), count, when in zip(
                rowids.items(), matched.tolist(), created.tolist(), strict=True
            )
            if count
        ]

    def _newest_carriers(self, tags: Sequence[str], limit: int, where: Node) -> list[TagMatch]:
        """Each tag's ``limit`` newest carriers passing ``where``, with how many of
        ``tags`` each carries (counted in one more query only when there are several)."""
        sql, params = to_sql(where)
        newest = (
            "SELECT t.rowid, m.id, t.created_at FROM memory_tags t "
            "JOIN memories m ON m.rowid = t.rowid WHERE t.tag = ?"
            + (f" AND {sql}" if sql else "")
            + " ORDER BY t.created_at DESC LIMIT ?"
        )
        carriers: dict[int, tuple[str, float]] = {}
        for tag in tags:
            for rowid, memory_id, created in self._conn.execute(newest, [tag, *params, limit]):
                carriers[rowid] = (memory_id, created)
        if len(tags) == 1:
            counts = dict.fromkeys(carriers, 1)
        else:
            # These rows passed ``where`` just now, under the same lock: counting their
            # tags needs no second pass through the filter.
            marks = ", ".join("?" * len(tags))
            counts = dict(
                self._conn.execute(
                    f"SELECT rowid, COUNT(*) FROM memory_tags WHERE tag IN ({marks}) "
                    "AND rowid IN (SELECT value FROM json_each(?)) GROUP BY rowid",
                    [*tags, json.dumps(list(carriers))],
                )
            )
        return [
            TagMatch(memory_id, int(counts[rowid]), float(created), rowid)
            for rowid, (memory_id, created) in carriers.items()
        ]

    def _tag_counts(
        self, ids: Sequence[str], tags: Sequence[str], where: Node | None
    ) -> list[TagMatch]:
        """How many of ``tags`` each of the memories ``ids`` carries (those carrying none,
        or failing ``where``, left out).

        SQLite starts from the given rows (CROSS JOIN fixes the join order) and looks
        each (row, tag) pair up in an index, instead of scanning every carrier of a
        common tag. ``where`` is checked here, in Python, on those few carriers: its SQL
        form (:func:`~hybrid_memory.filters.to_sql`) has SQLite first collect every
        memory passing the filter, which costs milliseconds to a hundred at 100,000
        memories. :func:`~hybrid_memory.filters.matches` is held to the same results as
        the SQL and Chroma forms by the filters' parity tests."""
        tag_marks = ", ".join("?" * len(tags))
        # Without a filter only the id index and memory_tags are read, not the rows.
        extra = ", m.metadata, m.tags, m.updated_at" if where is not None else ""
        passes = None if where is None else _row_test(where)
        out: list[TagMatch] = []
        for chunk, marks in _chunks(ids):
            query = (
                f"SELECT m.id, COUNT(*), t.created_at, m.rowid{extra} FROM memories m "
                f"CROSS JOIN memory_tags t ON t.rowid = m.rowid AND t.tag IN ({tag_marks}) "
                f"WHERE m.id IN ({marks}) GROUP BY m.rowid"
            )
            for r in self._conn.execute(query, [*tags, *chunk]):
                if passes is None or passes(r[4], r[5], float(r[2]), float(r[6])):
                    out.append(TagMatch(r[0], int(r[1]), float(r[2]), int(r[3])))
        return out

    def created_at(self, ids: Sequence[str]) -> dict[str, float]:
        """Creation times (epoch seconds) by id, for recency decay."""
        out: dict[str, float] = {}
        with self._lock:
            for chunk, marks in _chunks(ids):
                out.update(
                    self._conn.execute(
                        f"SELECT id, created_at FROM memories WHERE id IN ({marks})", chunk
                    ).fetchall()
                )
        return out

    def rows(self, ids: Sequence[str]) -> dict[str, IndexRow]:
        """Index rows by id (for ids present)."""
        out: dict[str, IndexRow] = {}
        with self._lock:
            for chunk, marks in _chunks(ids):
                for r in self._conn.execute(
                    "SELECT id, text, tags, metadata, content_hash, created_at, updated_at "
                    f"FROM memories WHERE id IN ({marks})",
                    chunk,
                ):
                    out[r[0]] = IndexRow(
                        r[0], r[1], tuple(json.loads(r[2])), json.loads(r[3]), r[4], r[5], r[6]
                    )
        return out

    def close(self) -> None:
        # Once the pending checkpoint has finished, nothing else can be queued while the
        # lock is held: the pool shuts down idle, and SQLite checkpoints on close.
        with self._writing() as c:
            if self._pool is not None:
                self._pool.shutdown()
            c.close()
