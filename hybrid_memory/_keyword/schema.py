"""The keyword index file's tables: made (or made again when the schema version or the
tokenizer changed), checked whole, and each connection's scratch tables."""

from __future__ import annotations

import re
import sqlite3
import uuid

from hybrid_memory._keyword.writes import create_batch_tables
from hybrid_memory._model.errors import InvalidInputError

# 2: FTS text NFKC-normalised like queries; 3: tag rows carry times; 4: row ids are
# never reused (an updated memory gets a new one), so in-memory postings stay exact.
SCHEMA_VERSION = "5"  # 5: the content hash covers the metadata
EPOCH_KEY = "epoch"  # see IndexFile.epoch

_TABLES = (
    "memories",
    "memories_vocab",
    "memories_fts",
    "memory_tags",
    "memory_meta",
    "memory_vectors",
)


def text_count(conn: sqlite3.Connection) -> int:
    """How many texts the FTS5 table holds: from its table of text lengths (one row per
    text, a plain table), where it has one; counting the FTS5 table itself reads every
    text (0.3-0.6 s at 200,000 memories)."""
    try:
        found = conn.execute("SELECT count(*) FROM memories_fts_docsize")
    except sqlite3.OperationalError:  # a small file's FTS5 table keeps no lengths
        found = conn.execute("SELECT count(*) FROM memories_fts")
    return int(found.fetchone()[0])


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
        if EPOCH_KEY not in stored:  # a file of an earlier version
            conn.execute("INSERT INTO index_state VALUES (?, ?)", (EPOCH_KEY, uuid.uuid4().hex))
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
        [("schema", SCHEMA_VERSION), ("tokenizer", tokenizer), (EPOCH_KEY, uuid.uuid4().hex)],
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
