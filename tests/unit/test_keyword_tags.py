"""The keyword index's tag queries, against a straightforward reference.

The reference reads every tag row and every memory passing the filter in plain SQL and
ranks in Python, exactly as :meth:`KeywordIndex.tag_carriers` documents it: for
``among``, every listed memory carrying a tag; otherwise each tag's ``limit`` newest
carriers (ties: the later index row first, as SQLite reads the (tag, created_at) index
backwards); then most matched tags first, newest first, lower index row first.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from hybrid_memory._keyword import tag_index as tags_module
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.tag_carriers import TagCarriers
from hybrid_memory._keyword.tag_index import TagMatch
from hybrid_memory._model.filters import Node, parse_filter, to_sql
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"
TAGS = ["alice", "bob", "ui", "new york", "health", "work", "東京", "rare"]
FILTERS: list[dict[str, Any] | None] = [
    None,
    {"user": "u1"},
    {"user": {"$in": ["u0", "u2"]}},
    {"score": {"$gt": 0.5}},
    {"$or": [{"user": "u3"}, {"flag": True}]},
    {"tags": {"$contains": "bob"}},
    {"tags": {"$not_contains": "ui"}},
    {"langs": {"$contains": "en"}},
    {"user": {"$ne": "u1"}},
    {"created_at": {"$gte": 40.0}},
    {"$and": [{"updated_at": {"$lt": 150.0}}, {"score": {"$lte": 0.7}}]},
]


def _rows(count: int, seed: int) -> list[IndexRow]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        metadata: dict[str, Any] = {"user": f"u{rng.randrange(4)}", "score": rng.random()}
        if rng.random() < 0.3:
            metadata["flag"] = rng.random() < 0.5
        if rng.random() < 0.3:
            metadata["langs"] = rng.sample(["en", "de", "fr"], rng.randint(1, 2))
        tags = tuple(rng.sample(TAGS[:-1], rng.choice([0, 1, 1, 2, 3, 4])))
        if i % 97 == 0:
            tags += ("rare",)
        created = float(rng.randrange(80))  # few distinct times: plenty of ties
        rows.append(IndexRow(f"m{i:04d}", f"memory {i}", tags, metadata, "", created, created * 2))
    return rows


@pytest.fixture(scope="module")
def filled() -> Iterator[KeywordIndex]:
    index = KeywordIndex(None, TOKENIZER)
    index.upsert(_rows(1500, seed=11))
    yield index
    index.close()


def _reference(
    index: KeywordIndex,
    tags: list[str],
    limit: int,
    where: Node | None,
    among: list[str] | None,
) -> list[TagMatch]:
    conn = index.file.conn
    sql, params = to_sql(where)
    passing = {
        r[0]
        for r in conn.execute(
            "SELECT m.id FROM memories m" + (f" WHERE {sql}" if sql else ""), params
        )
    }
    memory = {
        r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, rowid, created_at FROM memories")
    }
    by_row = {row: memory_id for memory_id, (row, _) in memory.items()}
    carried: dict[str, set[str]] = {}
    for tag, row in conn.execute("SELECT tag, rowid FROM memory_tags"):
        carried.setdefault(by_row[row], set()).add(tag)
    wanted = set(tags)
    carriers = [i for i in memory if i in passing and carried.get(i, set()) & wanted]
    if among is not None:
        chosen = set(among) & set(carriers)
    else:
        chosen = set()
        for tag in tags:
            with_tag = [i for i in carriers if tag in carried[i]]
            with_tag.sort(key=lambda i: (memory[i][1], memory[i][0]), reverse=True)
            chosen.update(with_tag[:limit])
    found = [TagMatch(i, len(carried[i] & wanted), memory[i][1], memory[i][0]) for i in chosen]
    found.sort(key=lambda m: (-m.matched, -m.created_at, m.row))
    return found[:limit]


@pytest.mark.parametrize("where", FILTERS)
def test_newest_carriers_match_the_reference(filled: KeywordIndex, where: Any) -> None:
    node = parse_filter(where)
    rng = random.Random(str(where))
    for _ in range(12):
        tags = rng.sample(TAGS, rng.randint(1, 4))
        limit = rng.choice([1, 5, 20, 100, 2000])
        expected = _reference(filled, tags, limit, node, None)
        assert filled.tag_carriers(tags, limit, node) == expected
        scope = filled.within(node, 10_000)
        assert scope is not None
        assert filled.tag_carriers(tags, limit, node, within=scope[0]) == expected


@pytest.mark.parametrize("where", FILTERS)
def test_carriers_among_ids_match_the_reference(filled: KeywordIndex, where: Any) -> None:
    node = parse_filter(where)
    rng = random.Random(repr(where))
    everyone = [f"m{i:04d}" for i in range(1500)]
    for size in (1, 7, 60, 499, 500, 501, 1200):  # around and beyond one statement's chunk
        tags = rng.sample(TAGS, rng.randint(1, 4))
        among = [*rng.sample(everyone, size), "not-indexed"]
        expected = _reference(filled, tags, len(among), node, among)
        assert filled.tag_carriers(tags, len(among), node, among=among) == expected
        assert filled.tag_carriers(tags, 3, node, among=among) == expected[:3]


def test_repeated_ids_among_count_once(filled: KeywordIndex) -> None:
    once = filled.tag_carriers(["alice", "bob"], 10, among=["m0001", "m0002", "m0003"])
    twice = filled.tag_carriers(
        ["alice", "bob"], 10, among=["m0001", "m0002", "m0003", "m0002", "m0001"]
    )
    assert twice == once


def test_ties_go_to_the_lower_index_row() -> None:
    index = KeywordIndex(None, TOKENIZER)
    index.upsert([IndexRow(f"t{i}", "same time", ("a",), {}, "", 5.0, 5.0) for i in range(6)])
    # The newest cut reads the (tag, created_at) index backwards: the later rows are cut
    # in; the ranking then lists ties lower row first.
    assert [m.id for m in index.tag_carriers(["a"], 3)] == ["t3", "t4", "t5"]
    assert [m.id for m in index.tag_carriers(["a"], 6, among=["t5", "t0", "t2"])] == [
        "t0",
        "t2",
        "t5",
    ]
    index.close()


def test_all_tags_lists_each_tag_in_use_once_sorted(filled: KeywordIndex) -> None:
    distinct = {r[0] for r in filled.file.conn.execute("SELECT DISTINCT tag FROM memory_tags")}
    assert filled.all_tags() == sorted(distinct)
    index = KeywordIndex(None, TOKENIZER)
    assert index.all_tags() == []
    index.upsert([IndexRow("x", "x", ("zoë", "ä", "a", "東京", "a b", "Z"), {}, "", 1.0, 1.0)])
    index.upsert([IndexRow("y", "y", ("a",), {}, "", 1.0, 1.0)])
    assert index.all_tags() == sorted(["zoë", "ä", "a", "東京", "a b", "Z"])
    index.delete(["x"])
    assert index.all_tags() == ["a"]
    index.close()


def _assert_like_reference(index: KeywordIndex, rng: random.Random, rounds: int = 6) -> None:
    everyone = [r[0] for r in index.file.conn.execute("SELECT id FROM memories")]
    for _ in range(rounds):
        tags = rng.sample(TAGS, rng.randint(1, 3))
        limit = rng.choice([3, 20, 500])
        assert index.tag_carriers(tags, limit) == _reference(index, tags, limit, None, None)
        among = rng.sample(everyone, min(80, len(everyone)))
        assert index.tag_carriers(tags, len(among), among=among) == _reference(
            index, tags, len(among), None, among
        )


@pytest.mark.parametrize("capacity", [None, 150], ids=["every tag at once", "tag by tag"])
def test_held_carriers_follow_this_indexs_writes(tmp_path: Path, capacity: int | None) -> None:
    index = KeywordIndex(str(tmp_path / "index.sqlite3"), TOKENIZER)
    if capacity is not None:  # too small to hold every tag: read one at a time, evicted
        index.tags.carriers = TagCarriers(capacity)
    rows = _rows(600, seed=21)
    index.upsert(rows[:400])
    rng = random.Random(3)
    _assert_like_reference(index, rng)  # every tag is held from here on
    index.upsert(rows[400:])  # new carriers, newer and older than the held ones
    _assert_like_reference(index, rng)
    changed = [
        IndexRow(r.id, r.text, tuple(reversed(TAGS[: i % 4])), r.metadata, "", 90.0 + i, 0.0)
        for i, r in enumerate(rows[::7])
    ]
    index.upsert(changed)  # tags taken off and put on, new row ids
    _assert_like_reference(index, rng)
    index.delete([r.id for r in rows[::5]])
    _assert_like_reference(index, rng)
    with pytest.raises(RuntimeError), index.upserting(rows[1:3]):
        raise RuntimeError("the other store refused")  # rolled back: nothing to follow
    _assert_like_reference(index, rng)
    index.clear()
    assert index.tag_carriers(["alice"], 10) == []
    index.close()


@pytest.mark.parametrize("reader_has_postings", [True, False])
def test_held_carriers_follow_another_connections_writes(
    tmp_path: Path, reader_has_postings: bool
) -> None:
    path = str(tmp_path / "shared.sqlite3")
    writer, reader = KeywordIndex(path, TOKENIZER), KeywordIndex(path, TOKENIZER)
    rows = _rows(500, seed=22)
    writer.upsert(rows[:300])
    if reader_has_postings:
        reader.search("memory", 5)
    rng = random.Random(4)
    _assert_like_reference(reader, rng)  # the reader holds every tag now
    writer.upsert(rows[300:])
    _assert_like_reference(reader, rng)
    writer.upsert([IndexRow(r.id, r.text, ("rare", "bob"), {}, "", 95.0, 95.0) for r in rows[::9]])
    writer.delete([r.id for r in rows[::4]])
    _assert_like_reference(reader, rng)
    # The reader's own write after the writer's keeps both.
    reader.upsert([IndexRow("mine", "mine", ("rare",), {}, "", 99.0, 99.0)])
    assert reader.tag_carriers(["rare"], 500) == _reference(reader, ["rare"], 500, None, None)
    assert reader.tag_carriers(["rare"], 1)[0].id == "mine"
    writer.close()
    reader.close()


class _Recording:
    """The tag index's connection, recording the statements that read tag carriers from
    ``memory_tags`` (every other call goes through unchanged)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.reads: list[str] = []

    def execute(self, statement: str, *args: Any) -> Any:
        if "FROM memory_tags" in statement and "rowid, created_at" in statement:
            self.reads.append(statement)
        return self._conn.execute(statement, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _carrier_reads(index: KeywordIndex) -> list[str]:
    """The carrier reads of ``index``'s tag lookups from here on."""
    recording = _Recording(index.tags._conn)
    index.tags._conn = recording  # type: ignore[assignment]
    return recording.reads


def test_an_index_filled_from_empty_never_reads_its_carriers(tmp_path: Path) -> None:
    index = KeywordIndex(str(tmp_path / "index.sqlite3"), TOKENIZER)
    reads = _carrier_reads(index)
    rows = _rows(400, seed=23)
    index.upsert(rows[:250])
    rng = random.Random(5)
    _assert_like_reference(index, rng)
    index.upsert([*rows[250:], IndexRow("late", "late", ("brand new",), {}, "", 1.0, 1.0)])
    _assert_like_reference(index, rng)
    assert [m.id for m in index.tag_carriers(["brand new"], 5)] == ["late"]
    assert reads == []
    index.close()


def test_a_reopened_index_reads_every_tag_once_then_follows_its_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "index.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    rows = _rows(400, seed=24)
    first.upsert(rows[:300])
    first.close()
    index = KeywordIndex(path, TOKENIZER)
    reads = _carrier_reads(index)
    assert not index.tags.carriers.complete
    rng = random.Random(6)
    _assert_like_reference(index, rng)
    assert len(reads) == 1  # every tag in one pass
    assert index.tags.carriers.complete
    index.upsert([*rows[300:], IndexRow("late", "late", ("brand new",), {}, "", 1.0, 1.0)])
    _assert_like_reference(index, rng)
    assert [m.id for m in index.tag_carriers(["brand new", "nobody's"], 5)] == ["late"]
    assert len(reads) == 1
    index.close()


def test_a_reopened_index_with_many_carriers_reads_them_tag_by_tag(tmp_path: Path) -> None:
    """Past ``_READ_ALL_UP_TO`` carriers, no search reads them all: each tag is read when
    a search first asks for it, with the same answers."""
    path = str(tmp_path / "index.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    first.upsert(_rows(300, seed=25))
    first.close()
    index = KeywordIndex(path, TOKENIZER)
    reads = _carrier_reads(index)
    with patch.object(tags_module, "_READ_ALL_UP_TO", 50):
        _assert_like_reference(index, random.Random(7))
    assert len(reads) > 1
    assert all("WHERE tag = ?" in sql for sql in reads)
    assert not index.tags.carriers.complete
    index.close()


def _built_aside(index: KeywordIndex) -> None:
    """Have a reopened ``index`` build its postings on their thread (started by a search,
    which FTS5 answers meanwhile) and wait for it: its next search takes them."""
    index.search("memory", 5)
    assert index.keywords.postings is None
    thread = index.keywords.keeper._aside
    assert thread is not None
    thread.join()


def test_a_reopened_index_reads_its_carriers_beside_its_postings(tmp_path: Path) -> None:
    """A reopened index file reads every tag's carriers on its postings' thread, from
    their snapshot: no search reads them, and they follow what was written between that
    snapshot and the search that takes them, by another connection and by its own."""
    path = str(tmp_path / "index.sqlite3")
    other = KeywordIndex(path, TOKENIZER)
    rows = _rows(500, seed=26)
    other.upsert(rows[:300])
    index = KeywordIndex(path, TOKENIZER)
    reads = _carrier_reads(index)
    with patch.object(tags_module, "_READ_ALL_UP_TO", 0):  # else a search reads every tag
        _built_aside(index)
        other.upsert(rows[300:400])
        other.upsert(
            [IndexRow(r.id, r.text, ("rare", "bob"), {}, "", 95.0, 0.0) for r in rows[::9]]
        )
        other.delete([r.id for r in rows[::4]])
        index.upsert([*rows[400:], IndexRow("late", "late", ("brand new",), {}, "", 99.0, 0.0)])
        index.delete([r.id for r in rows[1::6]])
        index.search("memory", 5)  # takes the postings, and the carriers with them
        assert index.keywords.postings is not None
        assert index.tags.carriers.complete
        _assert_like_reference(index, random.Random(8))
        assert [m.id for m in index.tag_carriers(["brand new"], 5)] == ["late"]
        other.upsert([IndexRow("theirs", "theirs", ("rare",), {}, "", 99.5, 0.0)])
        assert index.tag_carriers(["rare"], 1)[0].id == "theirs"
        _assert_like_reference(index, random.Random(9))
    assert reads == []
    other.close()
    index.close()


@pytest.mark.parametrize("why", ["too many to hold", "the read failed"])
def test_carriers_not_read_beside_the_postings_are_read_by_searches(
    tmp_path: Path, why: str
) -> None:
    """Carriers that do not fit in half the capacity, or whose read beside the postings
    failed (not the file's damage), are read tag by tag as searches ask: the same answers."""
    path = str(tmp_path / "index.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    first.upsert(_rows(300, seed=27))
    first.close()
    index = KeywordIndex(path, TOKENIZER)
    reads = _carrier_reads(index)
    with contextlib.ExitStack() as stack:
        stack.enter_context(patch.object(tags_module, "_READ_ALL_UP_TO", 0))
        if why == "too many to hold":
            index.tags.carriers = TagCarriers(100)
        else:
            stack.enter_context(
                patch.object(tags_module.TagIndex, "read_beside", side_effect=MemoryError)
            )
        _built_aside(index)
        index.search("memory", 5)
        assert index.keywords.postings is not None
        assert not index.tags.carriers.complete
        _assert_like_reference(index, random.Random(10))
    assert reads and all("WHERE tag = ?" in sql for sql in reads)
    index.close()


def _ranking_reference(
    index: KeywordIndex,
    tags: list[str],
    depth: int,
    ranks: dict[str, int],
    node: Node | None,
    exclude: str | None,
) -> dict[str, int]:
    """The tag leg's ranking as the two reference reads merged: each tag's newest
    carriers and the carriers among the ranked ids, ordered by matched count, best rank,
    newest, lower index row."""
    found = _reference(index, tags, depth, node, None)
    found += _reference(index, tags, len(ranks), node, list(ranks))
    best = {m.id: m for m in found if m.id != exclude}
    unranked = len(ranks) + 10**9
    ordered = sorted(
        best.values(),
        key=lambda m: (-m.matched, ranks.get(m.id, unranked), -m.created_at, m.row),
    )
    return {m.id: m.matched for m in ordered[:depth]}


@pytest.mark.parametrize("where", FILTERS)
def test_the_tag_ranking_in_one_pass_matches_the_reference(
    filled: KeywordIndex, where: Any
) -> None:
    node = parse_filter(where)
    scope = filled.within(node, 10_000)
    assert scope is not None
    rng = random.Random(f"ranking {where}")
    everyone = [f"m{i:04d}" for i in range(1500)]
    for _ in range(10):
        tags = rng.sample(TAGS, rng.randint(1, 4))
        depth = rng.choice([1, 5, 25, 100, 2000])
        # the other legs' hits: passing the filter, several sharing a best rank
        passing = [i for i in everyone if node is None or i in set(scope[1])]
        hits = rng.sample(passing, min(len(passing), rng.choice([0, 3, 40, 150])))
        ranks = {i: rng.randint(1, max(1, len(hits) // 2)) for i in hits}
        exclude = rng.choice([None, *hits[:1], "m0007"])
        expected = _ranking_reference(filled, tags, depth, ranks, node, exclude)
        within = None if node is None else scope[0]
        got = filled.tag_ranking(tags, depth, ranks, (), exclude, within=within)
        assert list(got.items()) == list(expected.items())


def test_memories_lacking_an_asked_tag(filled: KeywordIndex) -> None:
    conn = filled.file.conn
    carried: dict[str, set[str]] = {}
    for memory_id, tag in conn.execute(
        "SELECT m.id, t.tag FROM memories m JOIN memory_tags t ON t.rowid = m.rowid"
    ):
        carried.setdefault(memory_id, set()).add(tag)
    ids = [f"m{i:04d}" for i in range(0, 1500, 7)] + ["not-indexed", "m0000"]
    for tags in (["alice"], ["alice", "bob"], ["bob", "bob"], ["rare", "work", "ui"]):
        expected = [
            i
            for i in dict.fromkeys(ids)
            if i != "not-indexed" and not set(tags) <= carried.get(i, set())
        ]
        assert filled.lacking_tags(tags, ids) == expected
