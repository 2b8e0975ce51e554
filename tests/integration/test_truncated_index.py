"""No SIGBUS (issue 45): a process whose keyword index files are truncated or replaced
under it by another process gets an answer, a rebuild or the library's error, never a
signal. SQLite maps the write-ahead log's index (``-shm``) into memory: a truncated
``-shm`` used to kill the reader with SIGBUS (exit status 135).

The reader is a real process with a store open; this test (another process) truncates or
replaces a file, then the reader searches, adds and closes, and must exit with status 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

READER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {repo!r})
    from hybrid_memory import HybridMemory, HybridMemoryError
    from benchmarks.seeded_embedding import SeededEmbedding

    store = HybridMemory(path=sys.argv[1], embedding=SeededEmbedding(),
                         embedding_name="seeded-64")
    store.add_many([f"memory {{i}} about zqzebra{{i}}" for i in range(300)])
    assert store.search("zqzebra5")[0].text.endswith("zqzebra5")
    print("READY", flush=True)
    sys.stdin.readline()  # the files are changed under this process now
    seen = {{}}
    for query in ("zqzebra7", "memory 9", "zqzebra250"):
        try:
            seen[query] = [h.text for h in store.search(query)][:1]
        except HybridMemoryError as error:
            seen[query] = f"{{type(error).__name__}}: {{error}}"
    try:
        store.add("written after the change zqafter")
        seen["after"] = [h.text for h in store.search("zqafter")][:1]
    except HybridMemoryError as error:
        seen["after"] = f"{{type(error).__name__}}: {{error}}"
    store.close()
    print("RESULT " + json.dumps(seen), flush=True)
    """
).format(repo=str(REPO))


@pytest.mark.fault
@pytest.mark.parametrize("change", ["truncate", "truncate-shm", "truncate-wal", "replace"])
def test_a_reader_survives_its_index_files_truncated_or_replaced(
    change: str, tmp_path: Path
) -> None:
    path = tmp_path / "memory"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "READY"
        (index,) = path.glob("keyword-*.sqlite3")
        suffix = change.partition("-")[2]
        target = Path(f"{index}-{suffix}") if suffix else index
        assert target.exists() and target.stat().st_size > 0
        if change == "replace":
            fresh = index.with_name("replacement.tmp")
            fresh.write_bytes(b"not an index at all" * 100)
            os.replace(fresh, index)
        else:
            os.truncate(target, 0)
        reader.stdin.write("go\n")
        reader.stdin.flush()
        out, err = reader.communicate(timeout=180)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, f"status {reader.returncode}: {err[-3000:]}"
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    seen = json.loads(line[len("RESULT ") :])
    # Every answer is a result or the library's error; the memories are still found
    # (from the collection, which a damaged index is rebuilt from).
    assert seen["zqzebra7"] == ["memory 7 about zqzebra7"], seen
    assert seen["after"] == ["written after the change zqafter"], seen
