"""A full disk (issue 45): with the store's files capped (``RLIMIT_FSIZE`` in a child
process, SIGXFSZ ignored, so writes fail with EFBIG as on a full disk), adds, batches,
updates and deletes either succeed or fail with the library's error naming the cause;
an add that raised stored nothing; reads keep working; and once space returns (a new
process without the cap) the store holds exactly the acknowledged memories, each found
on the keyword and the vector leg.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# The write reserve in these tests (HYBRID_MEMORY_WRITE_RESERVE): the cap is set a little
# under it (every write refused at once) and above it (writes succeed until the store's
# files come within the reserve of the cap, or the keyword index finds no room first).
RESERVE = 100_000

PRELUDE = textwrap.dedent(
    """
    import json, os, random, resource, signal, sys
    sys.path.insert(0, {repo!r})
    from hybrid_memory import HybridMemory, HybridMemoryError
    from benchmarks.seeded_embedding import SeededEmbedding

    def open_store(path):
        return HybridMemory(path=path, embedding=SeededEmbedding(), embedding_name="seeded-64")
    """
).format(repo=str(REPO))

# Writes under a cap of the largest file's size plus ``margin`` bytes.
CAPPED = PRELUDE + textwrap.dedent(
    """
    path, margin, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = open_store(path)
    store.add_many([f"written before the cap zqseed{i}" for i in range(20)])
    sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes) + margin, resource.RLIM_INFINITY))
    rng = random.Random(45)
    live = {m.id: m.text for m in store.list_memories()}
    out = {"added": [], "failed_adds": [], "deleted": [], "unsure": [], "updated": {},
           "errors": [], "reads_failed": []}

    def attempt(kind, call):
        try:
            return True, call()
        except HybridMemoryError as error:
            out["errors"].append([kind, type(error).__name__, str(error)])
            return False, None
        except Exception as error:  # not the library's own: the test fails on it
            out["errors"].append([kind, "FOREIGN " + type(error).__name__, str(error)])
            return False, None

    for n in range(rounds):
        text = f"added under the cap zqcap{n}"
        ok, got = attempt("add", lambda: store.add(text))
        (out["added"] if ok else out["failed_adds"]).append(got if ok else text)
        if ok:
            live[got] = text
        texts = [f"a batch under the cap zqbatch{n}x{i}" for i in range(3)]
        ok, got = attempt("add_many", lambda: store.add_many(texts))
        if ok:
            out["added"].extend(got)
            live.update(zip(got, texts))
        else:
            out["failed_adds"].extend(texts)
        victim = rng.choice(sorted(live))
        new = f"updated under the cap zqupd{n}"
        ok, _ = attempt("update", lambda: store.update(victim, text=new))
        if ok:
            out["updated"][victim] = new
            live[victim] = new
        else:
            out["unsure"].append(victim)
        victim = rng.choice(sorted(live))
        ok, _ = attempt("delete", lambda: store.delete([victim]))
        (out["deleted"] if ok else out["unsure"]).append(victim)
        if ok:
            live.pop(victim)
        for read in (lambda: store.search("under the cap"), lambda: store.get(victim)):
            try:
                read()
            except HybridMemoryError as error:
                if "no memory with id" not in str(error):
                    out["reads_failed"].append(str(error))
    out["live"] = live
    store.close()
    print("RESULT " + json.dumps(out), flush=True)
    """
)

# Opens the store without a cap: every memory, and whether each leg finds it.
AFTER = PRELUDE + textwrap.dedent(
    """
    store = open_store(sys.argv[1])
    store.sync(full=True)
    stored = {m.id: m.text for m in store.list_memories()}
    misses = []
    for memory_id, text in stored.items():
        token = text.rsplit(" ", 1)[-1]
        if not any(h.id == memory_id and "keyword" in h.ranks for h in store.search(token)):
            misses.append(["keyword", memory_id, text])
        if not any(h.id == memory_id and "vector" in h.ranks for h in store.search(text, k=10)):
            misses.append(["vector", memory_id, text])
    store.close()
    print("RESULT " + json.dumps({"stored": stored, "misses": misses}), flush=True)
    """
)


def run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "ANONYMIZED_TELEMETRY": "False",
            "HYBRID_MEMORY_WRITE_RESERVE": str(RESERVE),
        },
    )
    assert done.returncode == 0, f"status {done.returncode}: {done.stderr[-3000:]}"
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@pytest.mark.fault
@pytest.mark.parametrize("margin", [RESERVE - 10_000, RESERVE + 150_000])
def test_a_full_disk_fails_writes_clearly_and_keeps_exactly_the_acknowledged(
    margin: int, tmp_path: Path
) -> None:
    path = str(tmp_path / "memory")
    capped = run(CAPPED, path, str(margin), "30")
    errors = capped["errors"]
    assert errors, "the cap was never reached: nothing was tested"
    for kind, name, message in errors:
        assert name == "StoreError" or name == "IndexFileError", (kind, name, message)
        # The cause, in words a user can act on, and where.
        assert "RLIMIT_FSIZE" in message, (kind, message)
        assert path in message, (kind, message)
        assert "cannot rollback" not in message
    assert capped["reads_failed"] == []  # reads keep working on a full disk

    after = run(AFTER, path)
    stored, live = after["stored"], capped["live"]
    unsure = set(capped["unsure"])
    # Exactly the acknowledged memories: every one kept, with its last acknowledged text
    # (a write that raised on a memory leaves it as it was, or as the write wanted)...
    for memory_id, text in live.items():
        if memory_id not in unsure:
            assert stored.get(memory_id) == text, (memory_id, text, stored.get(memory_id))
    # ...nothing deleted back, nothing an add that raised wanted to store.
    for memory_id in capped["deleted"]:
        assert memory_id not in stored, memory_id
    failed_texts = set(capped["failed_adds"])
    assert not [t for t in stored.values() if t in failed_texts]
    assert set(stored) <= set(live) | unsure
    assert after["misses"] == []
