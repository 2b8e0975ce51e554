"""Writes to the keyword index: the one-statement batch (JSON into a trigger, run beside
Chroma's write) against the row-by-row write it replaced, and the transaction around it."""

from __future__ import annotations

import json
import random
import sqlite3
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybrid_memory._keyword import index as keyword
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.query_words import query_words
from hybrid_memory._keyword.writes import batch_json
from hybrid_memory._model.filters import parse_filter
from hybrid_memory._model.records import IndexRow

from .test_postings import assert_same

TOKENIZER = "porter unicode61 remove_diacritics 2"
WORDS = ["flow", "wing", "shock", "Zoë", "東京", "ﬁle", "ＡＢＣ", "x²", "naïve", "café"]
WORDS += ["the", "of", "and", "wind", "tunnel"]


def _float(rng: random.Random) -> float:
    """Any finite float: random bits, and the edges (zero, subnormal, huge)."""
    choice = rng.random()
    if choice < 0.2:
        return rng.choice([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.5, 1e300])
    if choice < 0.5:
        return round(rng.uniform(-100, 100), rng.randrange(4))
    while True:
        value: float = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if value == value and abs(value) != float("inf"):
            return value


def _value(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(WORDS)
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 7, 2**63 - 1, -(2**63), 10**12])
    if kind == 3:
        return _float(rng)
    if kind == 4:
        return [_float(rng) for _ in range(rng.randrange(1, 4))]
    return [rng.choice(WORDS) for _ in range(rng.randrange(1, 4))]


def random_rows(rng: random.Random, count: int, ids: int) -> list[IndexRow]:
    """Rows over a small id space (repeats within a batch and across batches)."""
    rows = []
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 9)))
        tags = tuple(dict.fromkeys(rng.choice(WORDS).lower() for _ in range(rng.randrange(4))))
        metadata = {f"k{j}": _value(rng) for j in range(rng.randrange(4))}
        created = _float(rng) if rng.random() < 0.3 else rng.uniform(1.6e9, 1.8e9)
        rows.append(
            IndexRow(f"m{rng.randrange(ids)}", text, tags, metadata, f"h{text}", created, created)
        )
    return rows


def _exact(value: Any) -> Any:
    """A stored value with its type, floats by their bits (0.1 + 1 ulp is not 0.1)."""
    if isinstance(value, float):
        return ("real", struct.pack("<d", value))
    return (type(value).__name__, value)


def dump(index: KeywordIndex) -> dict[str, Any]:
    """Everything the index holds, by memory id (row ids are the same in both paths)."""
    c = index.file.conn
    memories = {
        r[1]: (r[0], r[2], json.loads(r[3]), json.loads(r[4]), r[5], _exact(r[6]), _exact(r[7]))
        for r in c.execute(
            "SELECT rowid, id, text, tags, metadata, content_hash, created_at, updated_at "
            "FROM memories"
        )
    }
    return {
        "memories": memories,
        "fts": sorted(c.execute("SELECT rowid, text FROM memories_fts")),
        "tags": sorted((t, r, _exact(at)) for t, r, at in c.execute("SELECT * FROM memory_tags")),
        "meta": sorted(
            (r, k, kind, a, _exact(v))
            for r, k, kind, a, v in c.execute("SELECT * FROM memory_meta")
        ),
        "vectors": sorted(c.execute("SELECT rowid, vector FROM memory_vectors")),
        "sequence": c.execute("SELECT seq FROM sqlite_sequence").fetchall(),
    }


@pytest.mark.parametrize("seed", range(6))
def test_the_batch_statement_writes_what_the_row_by_row_write_does(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    batches = [random_rows(rng, rng.randrange(1, 40), ids=30) for _ in range(5)]
    fast = KeywordIndex(None, TOKENIZER)
    slow = KeywordIndex(None, TOKENIZER)
    fast.search("flow", 5)  # postings built: every write also extends them
    slow.search("flow", 5)
    for number, batch in enumerate(batches):
        assert batch_json(batch) is not None  # these rows take the batch statement
        # Every other batch with vectors (a write of this store), the rest without (rows
        # refilled from the collection): a replaced row keeps no vector of its old version.
        vectors = None
        if number % 2 == 0:
            vectors = np.random.default_rng(seed).standard_normal((len(batch), 4))
        fast.upsert(batch, vectors)
        with monkeypatch.context() as m:
            m.setattr(keyword, "batch_json", lambda rows: None)
            slow.upsert(batch, vectors)
        assert dump(fast) == dump(slow)
        for word in ("flow", "wing shock", "file abc", "zoe 東京", "x2 naive"):
            assert fast.search(word, 50) == slow.search(word, 50)
            reference = fast.keywords.search_fts(query_words(word), 50, None)
            assert_same(fast.search(word, 50), reference)
    assert fast.keywords.postings is not None and slow.keywords.postings is not None


def test_values_json_cannot_carry_are_written_row_by_row(tmp_path: Path) -> None:
    index = KeywordIndex(str(tmp_path / "k.sqlite3"), TOKENIZER)
    nul = IndexRow("a\x00b", "wing\x00flow", ("x\x00y",), {"k\x00": "v\x00", "n": 1.5}, "h", 1.0)
    assert batch_json([nul]) is None  # SQLite's JSON would cut these at the NUL
    index.upsert([nul])
    assert index.rows(["a\x00b"])["a\x00b"] == nul
    assert [h[0] for h in index.search("flow", 5)] == ["a\x00b"]
    assert index.file.conn.execute("SELECT tag FROM memory_tags").fetchall() == [("x\x00y",)]
    assert index.count(parse_filter({"k\x00": "v\x00"})) == 1
    # An int beyond 64 bits: SQLite refuses it, as it always did, and nothing is written.
    huge = IndexRow("big", "huge number", (), {"n": 2**70}, "h", 1.0)
    assert batch_json([huge]) is None
    with pytest.raises(OverflowError):
        index.upsert([huge, IndexRow("other", "other words", (), {}, "h", 1.0)])
    assert index.ids() == {"a\x00b"}


def _other_connection(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_rows_are_committed_only_when_the_body_returns(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    index.upsert([IndexRow("old", "wing flow", ("a",), {"n": 1}, "h", 1.0, 1.0)])
    index.search("wing", 5)  # postings built
    other = _other_connection(path)
    seen_inside: list[int] = []
    with index.upserting(
        [
            IndexRow("new", "shock wing", ("b",), {"n": 2}, "h2", 2.0, 2.0),
            IndexRow("old", "tunnel", ("c",), {}, "h3", 3.0, 3.0),
        ]
    ):
        seen_inside.append(other.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    assert seen_inside == [1]  # nothing visible while the body ran
    assert other.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 2
    assert [h[0] for h in index.search("wing", 5)] == ["new"]
    assert [h[0] for h in index.search("tunnel", 5)] == ["old"]
    assert index.all_tags() == ["b", "c"]


def test_a_failing_body_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    before_rows = [IndexRow("old", "wing flow", ("a",), {"n": 1}, "h", 1.0, 1.0)]
    index.upsert(before_rows)
    index.search("wing", 5)
    before = dump(index)
    rows = [
        IndexRow("new", "shock wing", ("b",), {"n": 2.5}, "h2", 2.0, 2.0),
        IndexRow("old", "tunnel", ("c",), {}, "h3", 3.0, 3.0),
    ]
    with pytest.raises(RuntimeError, match="chroma said no"), index.upserting(rows):
        raise RuntimeError("chroma said no")
    assert dump(index) == before
    assert index.search("shock", 5) == [] and index.search("tunnel", 5) == []
    assert [h[0] for h in index.search("wing", 5)] == ["old"]
    assert index.count() == 1 and index.all_tags() == ["a"]
    # Row ids are never reused, rolled back or not: the next write still works.
    index.upsert([IndexRow("new", "shock", (), {}, "h2", 2.0, 2.0)])
    assert [h[0] for h in index.search("shock", 5)] == ["new"]
    reopened = KeywordIndex(str(path), TOKENIZER)
    # (A reopened file ranks with FTS5's own bm25() while its postings are built
    # aside: the same scores, to the last bits.)
    got, expected = reopened.search("shock", 5), index.search("shock", 5)
    assert [h[0] for h in got] == [h[0] for h in expected]
    assert [h[1] for h in got] == pytest.approx([h[1] for h in expected], rel=1e-12)


def test_a_failing_index_write_raises_after_the_body_and_writes_nothing(
    tmp_path: Path,
) -> None:
    index = KeywordIndex(str(tmp_path / "k.sqlite3"), TOKENIZER)
    ran: list[bool] = []
    huge = [IndexRow("big", "huge", (), {"n": 2**70}, "h", 1.0, 1.0)]
    with pytest.raises(OverflowError), index.upserting(huge):
        ran.append(True)
    assert ran == [True] and index.count() == 0


def test_the_vectors_written_with_the_rows_are_kept_in_half_precision() -> None:
    index = KeywordIndex(None, TOKENIZER)
    rows = [IndexRow(i, f"text {i}", (), {}, f"h{i}", 1.0) for i in ("a", "b", "a")]
    vectors = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, -0.6]])
    index.upsert(rows, vectors)
    kept = index.vectors(["a", "b", "gone"])
    # A repeated id: its last row and its last vector, as the row itself.
    assert set(kept) == {"a", "b"}
    assert kept["a"].tolist() == np.array([0.5, -0.6], dtype=np.float16).astype(np.float32).tolist()
    assert kept["b"].dtype == np.float32
    assert kept["b"] == pytest.approx([0.3, 0.4], abs=1e-3)
    # Rewritten without a vector (refilled from the collection): the old one is gone with
    # its row; deleted: gone too.
    index.upsert([IndexRow("a", "text a again", (), {}, "h", 2.0)])
    assert set(index.vectors(["a", "b"])) == {"b"}
    index.delete(["b"])
    assert index.vectors(["a", "b"]) == {}
    assert index.file.conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone() == (0,)


@pytest.mark.parametrize("bad", [np.inf, np.nan, 1e6])
def test_vectors_half_precision_cannot_hold_are_not_kept(bad: float) -> None:
    # They are read from the collection instead; the rows are written all the same.
    index = KeywordIndex(None, TOKENIZER)
    rows = [IndexRow("a", "wing", (), {}, "h", 1.0), IndexRow("b", "flow", (), {}, "h", 1.0)]
    index.upsert(rows, np.array([[0.5, 0.5], [bad, 0.0]]))
    assert index.ids() == {"a", "b"}
    assert index.vectors(["a", "b"]) == {}
