"""The keyword index's own checkpoints of its write-ahead log: queued to the worker after
a write's commit, waited for by the next write, so the log stays bounded whatever the
threads' timing. Every check here is about the files' contents, none about time."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory._keyword import file as index_file
from hybrid_memory._keyword import postings_file
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"


def _vocabulary(rng: random.Random, size: int = 400) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randrange(3, 10))) for _ in range(size)]


VOCABULARY = _vocabulary(random.Random(0))


def rows(rng: random.Random, prefix: str, count: int) -> list[IndexRow]:
    """``count`` memories with distinct ids, a few dozen words of text, tags and metadata."""
    out = []
    for i in range(count):
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randrange(20, 60)))
        tags = tuple(sorted({rng.choice(VOCABULARY[:30]) for _ in range(rng.randrange(1, 4))}))
        metadata: dict[str, Any] = {"user": f"u{rng.randrange(20)}", "n": rng.random()}
        created = rng.uniform(1.6e9, 1.8e9)
        out.append(IndexRow(f"{prefix}-{i}", text, tags, metadata, f"h{prefix}-{i}", created))
    return out


def file_only_count(path: Path, tmp_path: Path) -> int:
    """Memories in the database file itself, without its write-ahead log: a copy of the
    file alone is opened (the index keeps the original open)."""
    copy = tmp_path / "file-only.sqlite3"
    shutil.copyfile(path, copy)
    other = sqlite3.connect(copy)
    try:
        # Before the first checkpoint the file holds no tables either: they are in the log.
        if other.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories'").fetchone():
            return int(other.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
        return 0
    finally:
        other.close()
        for leftover in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
            leftover.unlink(missing_ok=True)


def current_log(wal: Path) -> tuple[tuple[int, int], int, int]:
    """The write-ahead log as its file format describes it (sqlite.org/fileformat2.html):
    the salts that name the current log (new ones each time it starts over), how many
    frames it holds (those after the header that carry its salts) and the page size."""
    data = wal.read_bytes()
    page, salts = struct.unpack(">I", data[8:12])[0], struct.unpack(">2I", data[16:24])
    frames, at = 0, 32
    while at + 24 + page <= len(data) and struct.unpack(">2I", data[at + 8 : at + 16]) == salts:
        frames, at = frames + 1, at + 24 + page
    return salts, frames, page


def test_the_log_stays_bounded_over_many_batches(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    wal = Path(f"{path}-wal")
    index = KeywordIndex(str(path), TOKENIZER)
    rng = random.Random(1)
    logs = []
    for batch in range(40):
        with index.upserting(rows(rng, f"b{batch}", 300)):
            pass
        logs.append(current_log(wal))
    # Every batch waited for the checkpoint the one before queued, so it started the log
    # over: the log holds one batch, and the file is as long as the largest batch made it
    # (FTS5's merges of its segments make some batches several times longer than others).
    assert len({salts for salts, _, _ in logs}) == 40
    page = logs[0][2]
    largest = max(frames for _, frames, _ in logs)
    assert wal.stat().st_size == 32 + largest * (24 + page)
    assert sum(frames for _, frames, _ in logs) > 10 * largest  # the sum, without checkpoints
    assert index.count() == 12_000
    some = index.rows(["b0-0", "b39-299"])
    assert set(some) == {"b0-0", "b39-299"}
    word = some["b39-299"].text.split()[0]
    hits = index.search(word, 20_000)
    assert "b39-299" in {h[0] for h in hits}
    assert len(hits) == sum(word in r.text.split() for r in index.rows(list(index.ids())).values())
    index.close()
    reopened = KeywordIndex(str(path), TOKENIZER)
    assert reopened.count() == 12_000
    # The first search of a reopened file maps the postings the close left beside it;
    # they rank exactly as the ones kept in step did.
    reopened.search(word, 1)
    assert reopened.keywords.postings is not None and reopened.keywords.postings.mapped
    assert reopened.search(word, 20_000) == hits
    reopened.close()
    # Without them, the first search starts postings built aside (FTS5 ranks meanwhile),
    # which rank the same once built.
    os.unlink(postings_file.path_for(str(path)))
    reopened = KeywordIndex(str(path), TOKENIZER)
    reopened.search(word, 1)
    builder = reopened.keywords.keeper._aside
    assert builder is not None
    builder.join(timeout=120)
    assert reopened.search(word, 20_000) == hits
    assert reopened.keywords.postings is not None
    reopened.close()


def test_a_file_index_checkpoints_itself_and_the_next_write_waits_for_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    assert index.file.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    rng = random.Random(2)
    index.upsert(rows(rng, "few", 3))  # a handful of rows: no checkpoint yet
    assert index.file.pending_checkpoint is None
    assert file_only_count(path, tmp_path) == 0  # the rows are in the log only
    index.upsert(rows(rng, "many", 300))  # past the threshold: one is queued
    pending = index.file.pending_checkpoint
    assert pending is not None
    index.upsert(rows(rng, "next", 2))  # waits for it first
    assert pending.done() and pending.result() is None
    assert index.file.pending_checkpoint is None
    # The database file holds everything committed before that checkpoint, and not the
    # write after it (in the log until the next one).
    assert file_only_count(path, tmp_path) == 303
    assert index.count() == 305
    index.close()


def test_searches_between_single_adds_do_not_bring_checkpoints_forward(tmp_path: Path) -> None:
    """Searches fill temporary tables (their words go through a scratch FTS5 table);
    only the writes' own changes count towards the next checkpoint."""
    index = KeywordIndex(str(tmp_path / "k.sqlite3"), TOKENIZER)
    rng = random.Random(5)
    index.upsert(rows(rng, "base", 10))
    for n in range(10):
        for _ in range(20):  # new words every time: ~100 rows of scratch tables each
            index.search(" ".join(rng.sample(VOCABULARY, 5)) + f" novel{n}x{rng.random()}", 5)
        index.upsert(rows(rng, f"single{n}", 1))
        assert index.file.pending_checkpoint is None
    index.close()


def test_close_lets_a_pending_checkpoint_finish(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    with index.upserting(rows(random.Random(3), "a", 300)):
        pass
    pending = index.file.pending_checkpoint
    assert pending is not None
    index.close()
    assert pending.done() and pending.result() is None
    assert not Path(f"{path}-wal").exists()  # SQLite's own checkpoint on close, as before
    assert file_only_count(path, tmp_path) == 300


def test_delete_clear_and_state_writes_queue_checkpoints_too(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    rng = random.Random(4)
    index.upsert(rows(rng, "a", 300))
    index.set_state("k", "v")  # waits for the upsert's checkpoint
    assert index.file.pending_checkpoint is None and file_only_count(path, tmp_path) == 300
    assert index.delete([f"a-{i}" for i in range(250)]) == 250
    assert index.file.pending_checkpoint is not None
    index.set_state("k", "w")
    assert file_only_count(path, tmp_path) == 50
    index.upsert(rows(rng, "b", 300))
    index.set_state("k", "x")
    index.clear()
    assert index.file.pending_checkpoint is not None
    index.set_state("k", "y")
    assert file_only_count(path, tmp_path) == 0
    assert index.count() == 0 and index.get_state("k") == "y"
    index.close()


def test_a_failing_body_rolls_back_with_a_checkpoint_pending(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    rng = random.Random(5)
    index.upsert(rows(rng, "a", 300))
    assert index.file.pending_checkpoint is not None
    with pytest.raises(RuntimeError, match="chroma said no"), index.upserting(rows(rng, "b", 300)):
        raise RuntimeError("chroma said no")
    assert index.file.pending_checkpoint is None  # nothing committed, nothing queued
    assert index.count() == 300 and not index.rows(["b-0"])
    with index.upserting(rows(rng, "c", 300)):
        pass
    assert index.count() == 600 and set(index.rows(["c-0", "c-299"])) == {"c-0", "c-299"}
    index.close()
    assert KeywordIndex(str(path), TOKENIZER).count() == 600


def test_a_reader_on_another_connection_keeps_its_snapshot(tmp_path: Path) -> None:
    """A reader holds the log: a checkpoint copies what it can, writes go on appending,
    and once the reader is gone the next checkpoint copies the rest."""
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    rng = random.Random(6)
    index.upsert(rows(rng, "a", 300))
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 300
    for batch in range(3):
        index.upsert(rows(rng, f"b{batch}", 300))
        assert reader.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 300
    reader.execute("COMMIT")
    reader.close()
    index.upsert(rows(rng, "c", 300))  # its checkpoint is queued after the reader left
    index.set_state("k", "v")
    assert file_only_count(path, tmp_path) == 1500 == index.count()
    index.close()


class _FailingCheckpoints:
    """The index's connection, with its first ``PRAGMA wal_checkpoint`` raising ``error``."""

    def __init__(self, conn: sqlite3.Connection, error: Exception) -> None:
        self._conn = conn
        self._error: Exception | None = error

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if "wal_checkpoint" in sql and self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_failed_checkpoint_is_dropped_and_the_next_one_copies_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    rng = random.Random(7)
    busy = sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(index.file, "conn", _FailingCheckpoints(index.file.conn, busy))
    index.upsert(rows(rng, "a", 300))
    index.upsert(rows(rng, "b", 300))  # the first checkpoint failed: this write works
    assert file_only_count(path, tmp_path) == 0
    index.set_state("k", "v")  # waits for the second checkpoint, which copied both
    assert file_only_count(path, tmp_path) == 600 == index.count()
    index.close()


def test_an_unexpected_checkpoint_error_is_raised_once_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "k.sqlite3"
    index = KeywordIndex(str(path), TOKENIZER)
    monkeypatch.setattr(
        index.file, "conn", _FailingCheckpoints(index.file.conn, RuntimeError("a bug"))
    )
    index.upsert(rows(random.Random(8), "a", 300))
    with pytest.raises(RuntimeError, match="a bug"):
        index.set_state("k", "v")
    index.set_state("k", "v")
    assert index.get_state("k") == "v" and index.count() == 300
    index.close()


def test_an_in_memory_index_is_left_to_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_file, "CHECKPOINT_CHANGES", 1)
    index = KeywordIndex(None, TOKENIZER)
    index.upsert(rows(random.Random(9), "a", 50))
    assert index.file.pending_checkpoint is None and index.file._pool is None
    assert index.count() == 50
    index.close()


def test_a_reset_does_not_wait_for_a_checkpoint_waiting_for_its_lock(tmp_path: Path) -> None:
    # A write queued a checkpoint; before it took the lock, the index was found damaged
    # and reset under the lock. Waiting for the checkpoint there deadlocked the writer.
    index = KeywordIndex(str(tmp_path / "k.sqlite3"), TOKENIZER)
    index.upsert(rows(random.Random(1), "a", 5))
    file = index.file
    done = threading.Event()

    def reset_with_a_checkpoint_queued() -> None:
        with file.lock:
            checkpoint = file.worker().submit(file._checkpoint)  # waits for the lock
            index.reset(sqlite3.DatabaseError("database disk image is malformed"))
        checkpoint.result()  # ran once the lock was free, without error
        done.set()

    worker = threading.Thread(target=reset_with_a_checkpoint_queued, daemon=True)
    worker.start()
    worker.join(60)
    assert done.is_set(), "reset waited for a checkpoint that waited for the reset's lock"
    index.upsert(rows(random.Random(2), "b", 3))  # usable after the reset
    assert len(index.ids()) == 3  # started over (its file was called damaged), refilled by b
    index.close()
