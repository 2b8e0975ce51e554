"""Fault injection (issue 16): writers killed with SIGKILL at random points, the derived
keyword index damaged while another process has the store open, processes racing to
create a new store, and the Chroma server stopped and restarted under a running store.

Short by default (CI); ``HYBRID_MEMORY_FAULT_ROUNDS=20`` runs the long form. Every
process here is a real Python process with a real embedded Chroma or a real
``chroma run`` server; the embedding is the tests' deterministic hash embedding.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from hybrid_memory import HybridMemory, IndexFileError, StoreError

from ..conftest import ChromaServer, SeededEmbedding

pytestmark = pytest.mark.fault
REPO = Path(__file__).resolve().parents[2]
ROUNDS = int(os.environ.get("HYBRID_MEMORY_FAULT_ROUNDS", "3"))
INDEX = "keyword-hybrid_memory.sqlite3"

# A writer: adds memories (one at a time and in batches) and prints each id once add
# returned (flushed), so that the parent knows exactly what was acknowledged. With
# "tolerant", it reports errors instead of dying, and stops when the stop file appears.
WRITER = textwrap.dedent(
    """
    import os, random, sys, traceback, uuid
    sys.path.insert(0, {repo!r})
    from hybrid_memory import HybridMemory, HybridMemoryError
    from tests.conftest import SeededEmbedding

    target, seed, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    where = {{"url": target}} if target.startswith("http") else {{"path": target}}
    store = HybridMemory(**where, embedding=SeededEmbedding(),
                         embedding_name="test-seeded-64", sync_interval=0.2)
    print("ready", flush=True)
    stop = target + ".stop" if mode == "tolerant" else None
    while not (stop and os.path.exists(stop)):
        try:
            token = uuid.uuid4().hex[:12]
            if rng.random() < 0.3:
                items = [{{"text": f"fault memory w{{token}}x{{j}} about k{{token}}x{{j}}",
                           "tags": [f"t{{j % 3}}"], "metadata": {{"seed": seed}}}}
                         for j in range(rng.randint(2, 20))]
                for memory_id, item in zip(store.add_many(items), items):
                    print("ack", memory_id, item["text"], flush=True)
            else:
                text = f"fault memory w{{token}} about k{{token}}"
                memory_id = store.add(text, tags=["single"], metadata={{"seed": seed}})
                print("ack", memory_id, text, flush=True)
            if rng.random() < 0.2:
                store.search("fault memory about", k=3)
        except HybridMemoryError as exc:
            if mode != "tolerant":
                raise
            print("liberr", type(exc).__name__, str(exc)[:200].replace(chr(10), " "), flush=True)
        except Exception as exc:
            if mode != "tolerant":
                raise
            print("ERR", type(exc).__name__, traceback.format_exc().replace(chr(10), " | "),
                  flush=True)
    store.close()
    print("stopped", flush=True)
    """
).format(repo=str(REPO))


def spawn(
    tmp_path: Path, target: str, seed: int, mode: str = "strict"
) -> tuple[subprocess.Popen[bytes], Path]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    out = tmp_path / f"writer-{seed}.out"
    process = subprocess.Popen(
        [sys.executable, str(script), target, str(seed), mode],
        stdout=out.open("wb"),
        stderr=(tmp_path / f"writer-{seed}.err").open("wb"),
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"},
    )
    return process, out


def lines(out: Path) -> list[list[str]]:
    """The complete lines written so far (a kill can cut the last one short)."""
    text = out.read_text(errors="replace")
    complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    return [line.split(" ", 2) for line in complete.splitlines() if line]


def acknowledged(out: Path) -> dict[str, str]:
    return {parts[1]: parts[2] for parts in lines(out) if parts[0] == "ack"}


def wait_for(out: Path, word: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any(parts[0] == word for parts in lines(out)):
        assert time.monotonic() < deadline, f"no {word!r} from the writer"
        time.sleep(0.05)


def open_store(target: str | Path, **settings: object) -> HybridMemory:
    where: dict[str, object] = (
        {"url": target} if str(target).startswith("http") else {"path": target}
    )
    # Spread vectors: the vector leg finds each memory by its own text among thousands.
    return HybridMemory(
        **where, embedding=SeededEmbedding(), embedding_name="test-seeded-64", **settings
    )


def check_every_leg(store: HybridMemory, acked: dict[str, str]) -> None:
    """Every acknowledged memory is read back by id, and found by the keyword leg and
    by the vector leg; and the index agrees with the collection."""
    assert store.count() == store.count({"seed": {"$gte": -1}})  # Chroma count == index count
    got = {m.id: m.text for m in store.get_many(list(acked))}
    assert got == acked
    for memory_id, text in acked.items():
        keyword = text.rsplit(" ", 1)[1]
        hits = store.search(keyword, alpha=0.0, k=3)
        assert any(h.id == memory_id and "keyword" in h.ranks for h in hits), (memory_id, text)
        hits = store.search(text, alpha=1.0, k=5)
        assert any(h.id == memory_id and "vector" in h.ranks for h in hits), (memory_id, text)


# Checks an embedded store from a new process, as an agent restarted after a crash
# would (this process keeps Chroma's system for a path it opened before).
VERIFIER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {repo!r})
    from hybrid_memory import HybridMemory
    from tests.conftest import SeededEmbedding
    path, acked = sys.argv[1], json.load(open(sys.argv[2]))
    result = {{"get": [], "keyword": [], "vector": []}}
    with HybridMemory(path, embedding=SeededEmbedding(),
                      embedding_name="test-seeded-64") as store:
        result["consistent"] = store.count() == store.count({{"seed": {{"$gte": -1}}}})
        found = {{m.id: m.text for m in store.get_many(list(acked))}}
        result["get"] = [i for i in acked if found.get(i) != acked[i]]
        for memory_id, text in acked.items():
            hits = store.search(text.rsplit(" ", 1)[1], alpha=0.0, k=3)
            if not any(h.id == memory_id and "keyword" in h.ranks for h in hits):
                result["keyword"].append(memory_id)
            hits = store.search(text, alpha=1.0, k=5)
            if not any(h.id == memory_id and "vector" in h.ranks for h in hits):
                result["vector"].append(memory_id)
    print(json.dumps(result))
    """
).format(repo=str(REPO))


def verify_in_new_process(tmp_path: Path, store_path: Path, acked: dict[str, str]) -> dict:
    """check_every_leg from a new process."""
    (tmp_path / "verify.py").write_text(VERIFIER)
    (tmp_path / "acked.json").write_text(json.dumps(acked))
    run = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "verify.py"),
            str(store_path),
            str(tmp_path / "acked.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def test_kill_9_of_a_writer_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rng = random.Random(16)
    store_path = tmp_path / "store"
    acked: dict[str, str] = {}
    kills = 0
    for round_ in range(ROUNDS):
        process, out = spawn(tmp_path, str(store_path), round_)
        if round_ % 4 == 3:
            time.sleep(rng.uniform(0.3, 2.5))  # somewhere in start-up and opening
        else:
            wait_for(out, "ready")
            time.sleep(rng.uniform(0.05, 2.0))
        process.send_signal(signal.SIGKILL)
        process.wait()
        errors = (tmp_path / f"writer-{round_}.err").read_text()
        assert process.returncode == -signal.SIGKILL, errors
        kills += 1
        acked.update(acknowledged(out))
        result = verify_in_new_process(tmp_path, store_path, acked)  # the agent restarted
        assert result["consistent"] and not result["get"] and not result["keyword"], result
        assert not result["vector"], result
    print(f"\nkill -9: {kills} kills, {len(acked)} acknowledged memories, 0 lost")
    assert kills == ROUNDS and acked


def test_processes_creating_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    for round_ in range(max(1, ROUNDS // 3)):
        path = tmp_path / f"new-{round_}"
        start = time.time() + 4  # after the imports of every process
        script = textwrap.dedent(
            f"""
            import sys, time
            sys.path.insert(0, {str(REPO)!r})
            from hybrid_memory import HybridMemory
            from tests.conftest import SeededEmbedding
            while time.time() < {start}:
                pass
            with HybridMemory({str(path)!r}, embedding=SeededEmbedding(),
                              embedding_name="test-seeded-64") as store:
                store.add("created at once by " + sys.argv[1], id=sys.argv[1])
            """
        )
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", script, f"p{i}"],
                stderr=subprocess.PIPE,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
            for i in range(3)
        ]
        errors = [p.communicate(timeout=120)[1].decode() for p in processes]
        assert [p.returncode for p in processes] == [0, 0, 0], errors
        with open_store(path) as store:
            assert sorted(m.id for m in store.get_many(["p0", "p1", "p2"])) == ["p0", "p1", "p2"]
            assert store.count() == 3 and len(store.search("created at once", alpha=0.0)) == 3


def _damage(index: Path, how: str, rng: random.Random) -> None:
    if how == "deleted":
        index.unlink(missing_ok=True)
        return
    data = index.read_bytes() if index.exists() else b""
    if how == "truncated":
        index.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        index.write_bytes(rng.randbytes(max(len(data), 4096)))
    elif how == "header":
        index.write_bytes(b"not a database!!" * 6 + data[96:])
    else:  # middle
        middle = len(data) // 2
        index.write_bytes(data[:middle] + rng.randbytes(4096) + data[middle + 4096 :])


def test_index_damaged_while_another_process_has_the_store_open(tmp_path: Path) -> None:
    rng = random.Random(7)
    store_path = tmp_path / "store"
    with open_store(store_path) as store:  # the index file exists before the holder starts
        store.add("a first memory about kzero", id="first", metadata={"seed": 0})
    holder, out = spawn(tmp_path, str(store_path), 99, mode="tolerant")
    wait_for(out, "ready")
    ways = ["truncated", "garbage", "header", "middle", "deleted"]
    damaged = []
    try:
        for attempt in range(max(len(ways), ROUNDS)):
            time.sleep(rng.uniform(0.3, 1.0))
            how = ways[attempt % len(ways)]
            _damage(store_path / INDEX, how, rng)
            damaged.append(how)
            time.sleep(rng.uniform(0.1, 0.5))
            # A new process (here: this one) opens the path meanwhile: it repairs.
            with open_store(store_path) as other:
                assert other.get("first").text.endswith("kzero")
                assert other.search("kzero", alpha=0.0)[0].id == "first"
        (tmp_path / "store.stop").write_text("")
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
    report = lines(out)
    unexpected = [" ".join(p) for p in report if p[0] == "ERR"]
    assert not unexpected, unexpected
    assert holder.returncode == 0, (tmp_path / "writer-99.err").read_text()[-3000:]
    assert report[-1] == ["stopped"]
    acked = acknowledged(out)
    assert len(acked) > 10
    result = verify_in_new_process(
        tmp_path, store_path, {**acked, "first": "a first memory about kzero"}
    )
    assert result["consistent"] and not result["get"] and not result["keyword"], result
    assert not result["vector"], result
    library_errors = [p for p in report if p[0] == "liberr"]
    print(
        f"\nindex damaged {len(damaged)} times ({', '.join(damaged)}) under a writer: "
        f"{len(acked)} acknowledged, 0 lost, {len(library_errors)} library errors seen"
    )


@pytest.mark.server
def test_chroma_server_stopped_and_restarted_under_a_running_store(tmp_path: Path) -> None:
    server = ChromaServer(tmp_path).start()
    try:
        name = f"restart-{uuid.uuid4().hex[:8]}"
        store = open_store(server.url, collection=name, sync_interval=0)
        acked = {}
        for round_ in range(max(1, ROUNDS // 3)):
            for i in range(10):
                text = f"server memory r{round_}i{i} about kr{round_}i{i}"
                acked[store.add(text, metadata={"seed": round_})] = text
            server.stop()
            for call in (
                lambda: store.add("written while the server is down, about kdown"),
                lambda: store.search("server memory"),
                lambda: store.get(next(iter(acked))),
                lambda: store.count(),
            ):
                started = time.monotonic()
                with pytest.raises(StoreError) as info:
                    call()
                assert "Chroma" in str(info.value)
                assert time.monotonic() - started < 30
            with pytest.raises(StoreError, match="chroma run"):
                open_store(server.url, collection=name)  # a new agent: a clear hint
            server.start()
            # The same store object (the agent was not restarted) works again.
            text = f"server memory after restart {round_} about kafter{round_}"
            acked[store.add(text, metadata={"seed": round_})] = text
            check_every_leg(store, acked)
            assert store.search("kdown", alpha=0.0) == []  # the failed write left nothing
        store.close()
        with open_store(server.url, collection=name) as fresh:
            check_every_leg(fresh, acked)
    finally:
        server.stop()


# --- derived-index states the library repairs or reports (issue 21, item 6) -------------


def _store_with_memories(store_path: Path, n: int = 12) -> dict[str, str]:
    texts = {f"m{i}": f"a memory about topic{i} kept here" for i in range(n)}
    with open_store(store_path) as store:
        store.add_many([{"id": i, "text": t, "metadata": {"seed": 0}} for i, t in texts.items()])
    return texts


def _keyword_finds(store: HybridMemory, texts: dict[str, str]) -> None:
    for memory_id, text in texts.items():
        hits = store.search(text.split()[3], alpha=0.0, k=3)
        assert hits[0].id == memory_id and "keyword" in hits[0].ranks, (memory_id, hits)
    assert store.count() == store.count({"seed": {"$gte": -1}})


def test_rows_deleted_from_the_index_memories_table_are_repaired(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    texts = _store_with_memories(store_path)
    # While closed: rows gone from `memories`, their FTS rows left behind.
    with sqlite3.connect(store_path / INDEX) as conn:
        conn.execute("DELETE FROM memories WHERE id IN ('m1', 'm2', 'm3')")
    with open_store(store_path) as store:
        _keyword_finds(store, texts)
    # While open: the next search repairs it (and a reopen and a full sync keep it so).
    with open_store(store_path, sync_interval=0) as store:
        store.search("topic5", k=3)
        with sqlite3.connect(store_path / INDEX) as conn:
            conn.execute("DELETE FROM memories WHERE id IN ('m4', 'm5')")
        _keyword_finds(store, texts)
        store.sync(full=True)
        _keyword_finds(store, texts)
    with open_store(store_path) as store:
        _keyword_finds(store, texts)


def test_a_dropped_fts_table_is_rebuilt(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    texts = _store_with_memories(store_path)
    with sqlite3.connect(store_path / INDEX) as conn:
        conn.execute("DROP TABLE memories_fts")
    with open_store(store_path) as store:  # on open
        _keyword_finds(store, texts)
        with sqlite3.connect(store_path / INDEX) as conn:
            conn.execute("DROP TABLE memories_fts")
        _keyword_finds(store, texts)  # on the next search
    with open_store(store_path) as store:
        _keyword_finds(store, texts)


def _refused(store_path: Path, culprit: Path, *words: str) -> None:
    """Opening fails with the library's error naming ``culprit``, and the collection is
    left as it was."""
    with pytest.raises(IndexFileError) as raised:
        open_store(store_path)
    assert raised.value.path == str(culprit)
    message = str(raised.value)
    assert str(culprit) in message
    for word in words:
        assert word in message


def test_an_index_path_that_is_a_directory_is_reported(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    texts = _store_with_memories(store_path)
    index = store_path / INDEX
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.mkdir()
    (index / "keep.txt").write_text("the user's")
    _refused(store_path, index, "is a directory", "remove it")
    assert (index / "keep.txt").read_text() == "the user's"  # nothing of theirs removed
    (index / "keep.txt").unlink()
    index.rmdir()
    with open_store(store_path) as store:  # done as told: rebuilt from the collection
        _keyword_finds(store, texts)


def test_an_index_path_linked_to_dev_null_is_reported(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    texts = _store_with_memories(store_path)
    index = store_path / INDEX
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.symlink_to("/dev/null")
    _refused(store_path, index, "not a regular file", "remove it")
    assert Path("/dev/null").is_char_device()
    index.unlink()
    with open_store(store_path) as store:
        _keyword_finds(store, texts)


def test_an_index_file_that_cannot_be_opened_is_reported(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    texts = _store_with_memories(store_path)
    index = store_path / INDEX
    index.chmod(0)
    if os.geteuid() == 0:
        # Root reads and writes a file of mode 000: the store simply works.
        with open_store(store_path) as store:
            _keyword_finds(store, texts)
    else:
        _refused(store_path, index, "cannot be opened", "read and write")
    index.chmod(0o644)
    # What root cannot open either: an index_path whose directory cannot exist.
    unopenable = tmp_path / "a-file" / "index.sqlite3"
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(IndexFileError) as raised:
        open_store(store_path, index_path=str(unopenable))
    assert str(unopenable) in str(raised.value)
    assert "directory" in str(raised.value)


def test_a_lock_path_that_is_a_directory_is_reported(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    texts = _store_with_memories(store_path)
    lock = Path(f"{store_path / INDEX}.lock")
    lock.unlink()
    lock.mkdir()
    _refused(store_path, lock, "lock file", "remove it")
    lock.rmdir()
    with open_store(store_path) as store:
        _keyword_finds(store, texts)
