"""The keyword postings kept beside the index file: written when an index closes, mapped
by the next one to open it (ranking at once, the same as postings built afresh and as
FTS5's own bm25()), brought in step with what other connections wrote since, and never
trusted when they are not the file's: another lineage of its rows, a file restored from
a backup, a short or damaged postings file."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest

from hybrid_memory._keyword import postings_keeper as keeper_module
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.postings import Postings
from hybrid_memory._keyword.postings_file import MappedPostings, PostingsFileError, path_for
from hybrid_memory._model.records import IndexRow

from .test_postings import QUERIES, TOKENIZER, assert_same, fts_ranking, random_rows


@pytest.fixture(autouse=True)
def small_stores_keep_postings() -> object:
    with patch.object(keeper_module, "SAVE_FROM_ROWS", 50):
        yield


def filled(path: Path, rows: int = 300, seed: int = 7) -> None:
    index = KeywordIndex(str(path), TOKENIZER)
    index.upsert(random_rows(random.Random(seed), rows))
    index.search("wing", 1)  # an index filled from empty holds its postings already
    index.close()


def mapped(index: KeywordIndex) -> bool:
    """Whether the index ranks with postings mapped from the kept file."""
    postings = index.keywords.postings
    return postings is not None and postings.mapped


def assert_ranks_as_fts5(index: KeywordIndex) -> None:
    for query in QUERIES:
        assert_same(index.search(query, 20), fts_ranking(index, query, 20))


def test_a_closed_index_leaves_postings_the_next_one_ranks_with_at_once(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path)
    assert os.path.exists(path_for(str(path)))
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert mapped(index)  # at the first search: nothing built aside
    assert_ranks_as_fts5(index)
    built = Postings()  # the same postings as built afresh from the file's tokens
    rows = index.file.conn.execute("SELECT rowid FROM memories").fetchall()
    assert len(rows) == len(index.keywords.postings)
    kept = {t: (r.tolist(), f.tolist()) for t, r, f in index.keywords.postings.each_term()}
    index.keywords.postings = None
    index.keywords.keeper._tried_file = True  # built aside this time
    while index.keywords.postings is None:
        index.search("wing", 1)
    built = index.keywords.postings
    assert kept == {t: (r.tolist(), f.tolist()) for t, r, f in built.each_term()}
    index.close()


def test_writes_after_the_file_was_kept_are_brought_in(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path)
    other = KeywordIndex(str(path), TOKENIZER)  # another process, without postings
    other.upsert(random_rows(random.Random(8), 40, start=300))
    other.delete([f"m{n}" for n in range(0, 300, 7)])
    other.upsert(random_rows(random.Random(9), 5, start=10))  # updates: new rows
    with patch.object(keeper_module, "SAVE_FROM_ROWS", 10**9):
        other.close()  # leaves the kept file as it was
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert mapped(index)
    assert_ranks_as_fts5(index)
    # And writes of this connection and another after the mapping.
    writer = KeywordIndex(str(path), TOKENIZER)
    writer.delete(["m301", "m3"])
    index.upsert(random_rows(random.Random(10), 3, start=400))
    assert_ranks_as_fts5(index)
    assert index.holding_every(["wing"], ["m400", "m401", "m402", "m3"]) == [
        i for i in ("m400", "m401", "m402") if "wing" in index.texts([i])[i]
    ]
    writer.close()
    index.close()


def test_postings_of_another_lineage_of_rows_are_not_used(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path)
    index = KeywordIndex(str(path), TOKENIZER)
    index.clear()  # a fill from scratch starts: the kept postings are no longer its
    index.upsert(random_rows(random.Random(11), 80))
    with patch.object(keeper_module, "SAVE_FROM_ROWS", 10**9):
        index.close()
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert not mapped(index)
    while index.keywords.postings is None:  # built aside, as without a kept file
        index.search("wing", 1)
    assert_ranks_as_fts5(index)
    index.close()


def test_a_restored_index_file_that_gave_row_ids_to_other_memories(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path, rows=200)
    backup = tmp_path / "backup.sqlite3"
    shutil.copy(path, backup)
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    index.upsert(random_rows(random.Random(12), 100, start=200))
    index.close()  # the kept postings now hold rows 201-300
    os.replace(backup, path)  # the index file put back as it was before them
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    index = KeywordIndex(str(path), TOKENIZER)
    others = random_rows(random.Random(13), 100)
    index.upsert([dataclasses.replace(r, id=f"other{n}") for n, r in enumerate(others)])
    with patch.object(keeper_module, "SAVE_FROM_ROWS", 10**9):
        index.close()
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert not mapped(index)
    while index.keywords.postings is None:
        index.search("wing", 1)
    assert_ranks_as_fts5(index)
    index.close()


@pytest.mark.parametrize("damage", ["short", "garbage header", "term out of order"])
def test_a_damaged_postings_file_is_left_for_ones_built_again(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path)
    kept = path_for(str(path))
    data = bytearray(Path(kept).read_bytes())
    if damage == "short":
        data = data[: len(data) // 2]
    elif damage == "garbage header":
        data[30:60] = b"x" * 30
    else:  # a term's rows descending: found when the term is first used
        epoch = KeywordIndex(str(path), TOKENIZER).get_state("epoch")
        assert epoch is not None
        probe = MappedPostings(kept, epoch)
        at = probe.term_index("wing")
        assert at is not None
        first = int(probe._starts[at])
        offset = int(probe._rows.__array_interface__["data"][0]) - int(
            np.frombuffer(probe._map, dtype=np.uint8).__array_interface__["data"][0]
        )
        del probe
        rows = np.frombuffer(bytes(data[offset + 4 * first : offset + 4 * first + 8]), "<i4")
        data[offset + 4 * first : offset + 4 * first + 8] = rows[::-1].tobytes()
    Path(kept).write_bytes(bytes(data))
    index = KeywordIndex(str(path), TOKENIZER)
    for _ in range(2000):
        hits = index.search("wing flow", 20)
        if index.keywords.postings is not None and not mapped(index):
            break
    assert_same(hits, fts_ranking(index, "wing flow", 20))
    while index.keywords.postings is None or mapped(index):
        index.search("wing", 1)
    assert_ranks_as_fts5(index)
    index.close()  # built again: kept again, whole
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert mapped(index)
    assert_ranks_as_fts5(index)
    index.close()


def test_the_file_is_written_again_only_when_much_is_missing_from_it(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path, rows=200)
    kept = path_for(str(path))
    written = os.stat(kept).st_mtime_ns
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    index.upsert(random_rows(random.Random(14), 5, start=200))
    with patch.object(keeper_module, "_RESAVE_ROWS", 10):
        index.close()
    assert os.stat(kept).st_mtime_ns == written  # five rows: not worth a rewrite
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert mapped(index)
    index.upsert(random_rows(random.Random(15), 60, start=205))
    with patch.object(keeper_module, "_RESAVE_ROWS", 10):
        index.close()
    assert os.stat(kept).st_mtime_ns != written
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert mapped(index) and index.keywords.postings.unsaved() == 0
    assert_ranks_as_fts5(index)
    index.close()


def test_a_mapped_file_refuses_another_epoch(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    filled(path)
    with pytest.raises(PostingsFileError, match="another state"):
        MappedPostings(path_for(str(path)), "not-the-epoch")


def tagged_rows(seed: int, count: int, start: int = 0) -> list[IndexRow]:
    rng = random.Random(seed)
    rows = random_rows(rng, count, start)
    tags = ["alice", "bob", "travel", "work", "idea"]
    return [
        dataclasses.replace(r, tags=tuple(rng.sample(tags, rng.randint(0, 3))), created_at=n)
        for n, r in enumerate(rows, start=start)
    ]


def test_the_tags_carriers_are_kept_with_the_postings(tmp_path: Path) -> None:
    """The reopened index answers tag lookups from the carriers kept in the file, in
    step with what another connection wrote since, as an index reading them afresh
    does, and without reading a tag's carriers itself."""
    path = tmp_path / "index.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    index.upsert(tagged_rows(1, 300))
    index.search("wing", 1)
    index.close()
    other = KeywordIndex(str(path), TOKENIZER)
    other.upsert(tagged_rows(2, 20, start=300))
    other.delete(["m5", "m17", "m302"])
    with patch.object(keeper_module, "SAVE_FROM_ROWS", 10**9):
        other.close()
    index = KeywordIndex(str(path), TOKENIZER)
    index.search("wing", 1)
    assert mapped(index) and index.tags.carriers.complete
    read: list[str] = []
    index.file.conn.set_trace_callback(read.append)
    ours = [
        index.tag_carriers(["alice", "travel"], 15),
        index.tag_carriers(["bob"], 40, among=[f"m{n}" for n in range(0, 320, 3)]),
        index.tag_ranking(["work", "idea"], 20, {"m1": 1, "m300": 2}),
    ]
    index.file.conn.set_trace_callback(None)
    assert not [s for s in read if "memory_tags" in s]
    fresh = KeywordIndex(str(path), TOKENIZER)  # reads the carriers from the table
    fresh.keywords.keeper._tried_file = True
    expected = [
        fresh.tag_carriers(["alice", "travel"], 15),
        fresh.tag_carriers(["bob"], 40, among=[f"m{n}" for n in range(0, 320, 3)]),
        fresh.tag_ranking(["work", "idea"], 20, {"m1": 1, "m300": 2}),
    ]
    assert ours == expected
    fresh.close()
    index.close()
