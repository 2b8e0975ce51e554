"""A namespace's keyword index file kept small (issue 44: ten thousand tenants within 2x
the disk of one Chroma collection): 512-byte pages, statements single-spaced, no FTS5
table of text lengths. Its rankings are those of a store's own file, score for score,
FTS5's own ``bm25()`` (query words it reads as phrases) included. Real SQLite files."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.filters import parse_filter
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"
_WORDS = (  # noqa: SIM905 - a sentence reads better than a list of 22 strings
    "dark mode theme coffee e-mail follow-up tea meeting friday deploy vault key "
    "berlin tokyo flight hotel dark-mode well-known piano guitar rust python"
).split()


def _rows(rng: random.Random, start: int, n: int) -> list[IndexRow]:
    return [
        IndexRow(
            f"m{i}",
            " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 25))),
            (rng.choice(_WORDS),),
            {"n": i % 3},
            f"h{i}",
            float(i),
            float(i),
        )
        for i in range(start, start + n)
    ]


# The trigram tokenizer makes every query word a phrase: FTS5's bm25() ranks them all.
@pytest.mark.parametrize("tokenizer", [TOKENIZER, "trigram"])
def test_a_small_file_ranks_as_a_store_file_does(tmp_path: Path, tokenizer: str) -> None:
    small = KeywordIndex(str(tmp_path / "ns.sqlite3"), tokenizer, page_size=512)
    full = KeywordIndex(str(tmp_path / "store.sqlite3"), tokenizer)
    rng = random.Random(44)
    first, second = _rows(rng, 0, 300), _rows(rng, 200, 200)  # 100 rewritten
    for index in (small, full):
        index.upsert(first)
        index.upsert(second)
        index.delete([f"m{i}" for i in range(0, 400, 7)])
    queries = [
        "e-mail",
        "dark-mode theme",
        "follow-up on the well-known e-mail",
        "coffee",
        "tokyo flight hotel",
        '"dark mode"',
        "rust-python",
    ]
    for query in queries:
        for where in (None, {"n": 1}):
            node = None if where is None else parse_filter(where)
            got = small.search(query, 50, node)
            assert got == full.search(query, 50, node), query
            assert got, query
    small.close()
    full.close()
    with sqlite3.connect(tmp_path / "ns.sqlite3") as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 512
    assert "memories_fts_docsize" not in names and "memories_fts_content" in names
    assert "sqlite_autoindex_index_state_1" not in names  # the state table has no row ids
    with sqlite3.connect(tmp_path / "store.sqlite3") as conn:
        catalogue = conn.execute("SELECT name FROM sqlite_master").fetchall()
    assert ("memories_fts_docsize",) in catalogue


def test_an_empty_namespace_file_is_small(tmp_path: Path) -> None:
    path = tmp_path / "ns.sqlite3"
    KeywordIndex(str(path), TOKENIZER, page_size=512).close()
    assert path.stat().st_size <= 13 * 1024  # 26 KiB at 1 KiB pages before
