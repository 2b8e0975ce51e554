"""Writing rows into the derived index: one batch of memories as one SQL statement.

A batch travels as JSON text into one INSERT on a view whose trigger fills every table:
SQLite then does all the work inside one ``sqlite3_step``, which releases the GIL, so the
write can run in a thread while Chroma's add (which holds the GIL) runs on another core.
An ``executemany`` would take the GIL back for every row.

Values JSON text cannot carry (SQLite's JSON cuts a string at NUL; an int beyond 64 bits
would turn into a float) are written row by row instead (:func:`write_rows`), with the
same result, which ``tests/unit/test_keyword_writes.py`` holds the two paths to.

Floats travel as the integers of their IEEE 754 bits and are rebuilt exactly in SQL
(significand times a power of two read from a table filled from Python floats): SQLite's
parsing of decimal text is not correctly rounded on every platform and SQLite version.

Everything here runs inside the caller's transaction, on the caller's connection.
"""

from __future__ import annotations

import json
import sqlite3
import struct
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hybrid_memory._keyword.tokens import tokens_sql
from hybrid_memory._model.filters import kind_of, metadata_rows
from hybrid_memory._model.records import IndexRow

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Batch:
    """One write: its rows (distinct ids) get row ids ``base``, ``base`` + 1, …"""

    rows: list[IndexRow]
    payload: tuple[str, str] | None  # from batch_json; None: row by row
    replaced: list[int]  # row ids of the older versions of these memories, deleted first
    base: int
    tokenise: bool  # also return the rows' tokens (the in-memory postings exist)
    # The rows' vectors, one after the other, each ``width`` bytes (half precision:
    # :func:`vector_bytes`); None: the rows are written without (their vectors are read
    # from the collection when needed).
    vectors: bytes | None = None
    width: int = 0

    def rowids(self) -> range:
        return range(self.base, self.base + len(self.rows))


def fts_text(text: str) -> str:
    """The text as FTS5 indexes it: NFKC-normalised like queries, so "ﬁle", "ＡＢＣ" and
    "x²" are found by the words "file", "ABC" and "x2" and by themselves."""
    return unicodedata.normalize("NFKC", text)


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


# The batch: ``base`` (the first new row id), ``memories`` (a JSON array, one
# ``[id, text, fts text or null, [tags], metadata JSON text, content hash, created bits,
# updated bits]`` per row, row id ``base`` + position), ``meta`` (``[position, key, kind,
# in_array, value, value is float bits]`` per metadata row), ``replaced`` (row ids to
# delete first), ``tokenise`` (also leave the batch's tokens in ``batch_tokens``, as
# :func:`~hybrid_memory._keyword.tokens.tokens_sql` reads them, for the postings), and
# ``vectors`` (a blob of every row's vector, ``width`` bytes each, or null).
BATCH_SCHEMA = f"""
CREATE TEMP TABLE IF NOT EXISTS pow2 (p2_exponent INTEGER PRIMARY KEY, p2_value REAL NOT NULL);
CREATE TEMP TABLE IF NOT EXISTS batch_tokens (tokens TEXT NOT NULL);
CREATE TEMP VIEW IF NOT EXISTS index_batch
    (base, memories, meta, replaced, tokenise, vectors, width)
    AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL;
CREATE TEMP TRIGGER IF NOT EXISTS index_batch_write INSTEAD OF INSERT ON index_batch BEGIN
    DELETE FROM batch_tokens;
    DELETE FROM memory_vectors WHERE rowid IN (SELECT value FROM json_each(NEW.replaced));
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
    INSERT INTO memory_vectors (rowid, vector)
        SELECT NEW.base + key, substr(NEW.vectors, key * NEW.width + 1, NEW.width)
        FROM json_each(NEW.memories) WHERE NEW.vectors IS NOT NULL;
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
    INSERT INTO batch_tokens (tokens) SELECT * FROM ({tokens_sql("new_terms")})
        WHERE NEW.tokenise;
    INSERT INTO new_texts (new_texts) SELECT 'delete-all' WHERE NEW.tokenise;
END;
"""


def create_batch_tables(conn: sqlite3.Connection) -> None:
    """The temporary view, trigger and tables the batch statement uses (per connection);
    ``temp.pow2`` is filled by the connection's first write (:func:`fill_powers`)."""
    conn.executescript(BATCH_SCHEMA)


# Every power of two a double holds, 2^-1074 (the least subnormal) to 2^1023, each exact:
# doubling and halving a power of two is exact in IEEE 754 throughout that range.
_POWERS = """
INSERT OR IGNORE INTO temp.pow2 (p2_exponent, p2_value)
WITH RECURSIVE
    up(e, v) AS (SELECT 0, 1.0 UNION ALL SELECT e + 1, v * 2.0 FROM up WHERE e < 1023),
    down(e, v) AS (SELECT -1, 0.5 UNION ALL SELECT e - 1, v / 2.0 FROM down WHERE e > -1074)
SELECT e, v FROM up UNION ALL SELECT e, v FROM down
"""


def fill_powers(conn: sqlite3.Connection) -> None:
    """Fill ``temp.pow2`` (:func:`_from_bits`) on a connection's first write, not when it
    opens: a connection that only reads (a namespace opened again for a search) never
    needs it, and filling it was most of opening an index file (11 of 16 ms). Called once
    per write, by the file's ``writing`` (every index write goes through it), before it
    counts the write's changes (its 2,098 rows are no write's, and counted they would
    bring the next checkpoint forward)."""
    if conn.execute("SELECT 1 FROM temp.pow2 LIMIT 1").fetchone() is None:
        conn.execute(_POWERS)


_META_JSON = json.JSONEncoder(sort_keys=True).encode  # json.dumps(…, sort_keys=True)


def batch_json(rows: Sequence[IndexRow]) -> tuple[str, str] | None:
    """``rows`` as the ``memories`` and ``meta`` JSON of one batch; None when some value
    cannot travel as JSON text: those batches are written row by row."""
    created = np.array([r.created_at for r in rows], dtype=np.float64).view(np.int64).tolist()
    updated = np.array([r.updated_at for r in rows], dtype=np.float64).view(np.int64).tolist()
    memories: list[tuple[Any, ...]] = []
    meta: list[tuple[Any, ...]] = []
    for position, r in enumerate(rows):
        text = r.text
        fts = fts_text(text)
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
    # matches: that batch merely takes the row-by-row way).
    if any("\\u0000" in part for part in out):
        return None
    return out


def write_batch(
    conn: sqlite3.Connection, batch: Batch, started: threading.Event | None = None
) -> str | None:
    """The rows of ``batch`` into every table, inside the caller's transaction; with
    ``batch.tokenise``, returns their tokens (as :func:`~hybrid_memory._keyword.tokens.tokens_sql`
    gives them) for the in-memory postings.

    The batch statement tokenises and groups the tokens itself: every statement ends by
    taking the GIL back, which Chroma holds through its write, so that work in a statement
    of its own would wait for the end of Chroma's write. ``started`` is set once the
    statement is under way."""
    if started is not None:
        started.set()
    if batch.payload is not None:
        memories, meta = batch.payload
        conn.execute(
            "INSERT INTO temp.index_batch VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                batch.base,
                memories,
                meta,
                json.dumps(batch.replaced),
                int(batch.tokenise),
                batch.vectors,
                batch.width,
            ),
        )
        if not batch.tokenise:
            return None
        tokens: str = conn.execute("SELECT tokens FROM temp.batch_tokens").fetchone()[0]
        return tokens
    write_rows(conn, batch)
    return take_new_tokens(conn) if batch.tokenise else None


def write_rows(conn: sqlite3.Connection, batch: Batch) -> None:
    """The row-by-row form of the batch statement (for values JSON cannot carry)."""
    delete_rows(conn, batch.replaced)
    pairs = list(zip(batch.rowids(), batch.rows, strict=True))
    conn.executemany(
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
    if batch.vectors is not None:
        width = batch.width
        conn.executemany(
            "INSERT INTO memory_vectors VALUES (?, ?)",
            [
                (rowid, batch.vectors[position * width : (position + 1) * width])
                for position, rowid in enumerate(batch.rowids())
            ],
        )
    texts = [(rowid, fts_text(r.text)) for rowid, r in pairs]
    conn.executemany("INSERT INTO memories_fts(rowid, text) VALUES (?, ?)", texts)
    if batch.tokenise:
        conn.executemany("INSERT INTO temp.new_texts(rowid, text) VALUES (?, ?)", texts)
    conn.executemany(
        "INSERT OR IGNORE INTO memory_tags VALUES (?, ?, ?)",
        [(tag, rowid, r.created_at) for rowid, r in pairs for tag in r.tags],
    )
    conn.executemany(
        "INSERT INTO memory_meta VALUES (?, ?, ?, ?, ?)",
        [
            (rowid, key, kind, in_array, value)
            for rowid, r in pairs
            for key, kind, in_array, value in metadata_rows(r.metadata)
        ],
    )


VECTOR_DTYPE = np.dtype("<f2")  # half precision: the feedback step's centroid needs no more


def vector_bytes(vectors: np.ndarray) -> tuple[bytes, int] | None:
    """A matrix of vectors (one row each) as the ``vectors`` blob of a batch, and the
    width in bytes of one vector; None when some component does not fit half precision
    (not finite, or beyond its range: a model's vectors are normalised, a caller's own
    may not be), and the vectors are then read from the collection instead."""
    with np.errstate(over="ignore"):
        matrix = np.ascontiguousarray(vectors, dtype=VECTOR_DTYPE)
    if not np.isfinite(matrix).all():
        return None
    return matrix.tobytes(), matrix.shape[1] * VECTOR_DTYPE.itemsize


def vector_of(blob: bytes) -> np.ndarray:
    """A vector as :func:`vector_bytes` stored it, in single precision."""
    return np.frombuffer(blob, dtype=VECTOR_DTYPE).astype(np.float32)


def take_new_tokens(conn: sqlite3.Connection) -> str:
    """The tokens of the rows in the scratch table ``new_texts``
    (:func:`~hybrid_memory._keyword.tokens.tokens_sql`), which is left empty."""
    try:
        tokens: str = conn.execute(tokens_sql("temp.new_terms")).fetchone()[0]
    finally:
        conn.execute("INSERT INTO temp.new_texts (new_texts) VALUES ('delete-all')")
    return tokens


# The tables holding a memory's index rows, by row id (``memories`` last: the others'
# rows are found through it).
ROW_TABLES = ("memories_fts", "memory_tags", "memory_meta", "memory_vectors", "memories")


def delete_rows(conn: sqlite3.Connection, rowids: Sequence[int]) -> None:
    """Index rows out of every table."""
    for table in ROW_TABLES:
        conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r,) for r in rowids])


def next_rowid(conn: sqlite3.Connection) -> int:
    """One above every row id the table ever had (deleted ones included): row ids are
    never reused, so a row id names one version of one memory for good."""
    used = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
    highest = conn.execute("SELECT MAX(rowid) FROM memories").fetchone()[0]
    return max(used[0] if used else 0, highest or 0) + 1
