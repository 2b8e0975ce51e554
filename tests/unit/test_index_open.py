"""Opening a keyword index file again (issue 44: a namespace opened again for a search
opens its file; the schema's statements, the state written again and the powers of two
filled on every open were 13 of its 16 ms). Real SQLite files."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest

from hybrid_memory._keyword import file as file_module
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.schema import create_schema
from hybrid_memory._keyword.template import write_empty
from hybrid_memory._keyword.writes import _POWERS, create_batch_tables
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"


def made(path: Path) -> None:
    index = KeywordIndex(str(path), TOKENIZER, page_size=1024)
    index.upsert([IndexRow("a", "wing flow", ("t",), {"n": 5e-324}, "h", 1.5, 2.5)])
    index.close()


def test_opening_a_file_of_this_version_writes_nothing_to_it(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    made(path)
    watch = sqlite3.connect(path, isolation_level=None)
    before = watch.execute("PRAGMA data_version").fetchone()[0]
    index = KeywordIndex(str(path), TOKENIZER, page_size=1024)
    assert index.count() == 1 and [i for i, _ in index.search("wing", 5, None)] == ["a"]
    assert watch.execute("PRAGMA data_version").fetchone()[0] == before  # no commit
    index.upsert([IndexRow("b", "wing tip", (), {"n": -0.0, "m": 1e308}, "h", 3.0, 3.0)])
    assert index.rows(["a", "b"])["a"].metadata == {"n": 5e-324}
    assert index.rows(["b"])["b"].metadata == {"n": -0.0, "m": 1e308}
    assert math.copysign(1.0, index.rows(["b"])["b"].metadata["n"]) == -1.0
    index.close()
    watch.close()


def test_a_file_missing_part_of_the_schema_gets_it_back(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    made(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX memory_meta_row")
    index = KeywordIndex(str(path), TOKENIZER, page_size=1024)
    assert index.count() == 1
    index.close()
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "memory_meta_row" in names


def test_the_powers_of_two_are_exact() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    create_batch_tables(conn)
    conn.execute(_POWERS)
    got = dict(conn.execute("SELECT p2_exponent, p2_value FROM temp.pow2"))
    assert got == {e: math.ldexp(1.0, e) for e in range(-1074, 1024)}


def test_a_new_small_file_is_a_copy_of_an_empty_one_and_never_replaces_a_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER, page_size=1024)
    index.upsert([IndexRow("a", "wing flow", ("t",), {"n": 1}, "h", 1.5, 2.5)])
    assert [i for i, _ in index.search("wing", 5, None)] == ["a"]
    index.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 1024
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    kept = path.read_bytes()
    write_empty(str(path), TOKENIZER, 1024, create_schema)  # a file is there: kept
    assert path.read_bytes() == kept
    assert not [p.name for p in tmp_path.iterdir() if ".new-" in p.name]  # nothing staged left


def test_a_file_emptied_under_an_open_connection_is_replaced_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by CI (test_hostile_input, "emptied", 2 runs in 19): a file emptied while a
    # connection had it open and its last writes still in the write-ahead log. Opening it
    # again reused the emptied file, whose lock that connection holds: switching it to
    # write-ahead logging waited BUSY_WAIT, then failed ("database is locked").
    monkeypatch.setattr(file_module, "BUSY_WAIT", 2.0)
    path = tmp_path / "k.sqlite3"
    first = KeywordIndex(str(path), TOKENIZER)
    first.upsert([IndexRow("a", "wing flow", ("t",), {"n": 1}, "h", 1.5, 2.5)])
    assert path.stat().st_size > 0 and Path(f"{path}-wal").stat().st_size > 0
    os.truncate(path, 0)
    second = KeywordIndex(str(path), TOKENIZER)  # an empty index, the rows refilled later
    assert second.count() == 0 and second.file.opened_empty
    second.upsert([IndexRow("b", "wing tip", (), {}, "h", 3.0, 3.0)])
    assert [i for i, _ in second.search("wing", 5, None)] == ["b"]
    # The first connection keeps the file it had (never a mix of the two).
    assert [i for i, _ in first.search("wing", 5, None)] == ["a"]
    first.close()
    second.close()
