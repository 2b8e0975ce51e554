"""``HybridMemory.list_memories(newest_first=True)``: the listing from the other end, paged
in the keyword index, and the ``(created_at, id)`` index that keeps either end fast, added
to index files made before it when they are opened."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hybrid_memory import HybridMemory, InvalidInputError

from ..conftest import HashEmbedding

UTC = timezone.utc


def open_store(path: Path) -> HybridMemory:
    return HybridMemory(path, embedding=HashEmbedding(), embedding_name="test-hash-64")


def _fill(store: HybridMemory) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    store.add_many(
        [
            {
                "text": f"note {i}",
                "id": f"n{i}",
                "metadata": {"user": "x" if i % 2 else "y"},
                "created_at": t0 + timedelta(minutes=i),
            }
            for i in range(7)
        ]
    )
    # Equal creation times: the id decides, reversed too.
    store.add("tie a", id="ta", created_at=t0 + timedelta(days=1))
    store.add("tie b", id="tb", created_at=t0 + timedelta(days=1))


def test_newest_first_is_the_oldest_first_order_reversed_and_pages(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    _fill(store)
    oldest = [m.id for m in store.list_memories()]
    newest = [m.id for m in store.list_memories(newest_first=True)]
    assert newest == list(reversed(oldest)) == ["tb", "ta", *(f"n{i}" for i in range(6, -1, -1))]
    assert [m.id for m in store.list_memories(newest_first=True, limit=3, offset=1)] == [
        "ta",
        "n6",
        "n5",
    ]
    filtered = store.list_memories({"user": "x"}, newest_first=True, limit=2, offset=1)
    assert [m.id for m in filtered] == ["n3", "n1"]
    assert store.list_memories(newest_first=True, offset=9) == []
    with pytest.raises(InvalidInputError, match="newest_first"):
        store.list_memories(newest_first="yes")  # type: ignore[arg-type]
    store.close()


def test_an_index_file_made_before_the_created_index_gets_it_on_open(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    _fill(store)
    index_file = store.stats().index_path
    store.close()
    assert index_file is not None
    with sqlite3.connect(index_file) as conn:
        conn.execute("DROP INDEX memories_created")
    reopened = open_store(tmp_path)
    with sqlite3.connect(index_file) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        plan = " ".join(
            str(r[-1])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT m.id FROM memories m "
                "ORDER BY m.created_at DESC, m.id DESC LIMIT 50 OFFSET 10"
            )
        )
    assert "memories_created" in names
    assert "memories_created" in plan and "TEMP B-TREE" not in plan  # no sort of every row
    assert [m.id for m in reopened.list_memories(newest_first=True, limit=2)] == ["tb", "ta"]
    reopened.close()
