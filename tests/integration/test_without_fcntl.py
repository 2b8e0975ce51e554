"""``import hybrid_memory`` works where ``fcntl`` does not exist (Windows; issue 46): the
package imports and serves in-memory and server stores, and only what needs a POSIX file
lock (an embedded path shared by processes) fails, when used, with a clear StoreError.

CI runs on Linux, so a child process makes ``fcntl`` unavailable before anything else is
imported (``sys.modules["fcntl"] = None``: every ``import fcntl`` then raises
ImportError, as on Windows).
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

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.modules["fcntl"] = None  # as on Windows: import fcntl raises ImportError
    sys.path.insert(0, {repo!r})
    try:
        import fcntl
    except ImportError:
        pass
    else:
        raise SystemExit("fcntl is still importable")
    import hybrid_memory
    from hybrid_memory import HybridMemory, StoreError
    from benchmarks.seeded_embedding import SeededEmbedding

    url, path, cache = sys.argv[1], sys.argv[2], sys.argv[3]
    seen = {{}}
    stores = {{"memory": {{}}, "server": {{"url": url, "collection": "no-fcntl",
                                       "cache_dir": cache}}}}
    for kind, place in stores.items():
        if not place and kind != "memory":
            continue
        store = HybridMemory(**place, embedding=SeededEmbedding(), embedding_name="seeded-64")
        memory_id = store.add(f"a {{kind}} store without fcntl zqnofcntl{{kind}}")
        hits = store.search(f"zqnofcntl{{kind}}")
        seen[kind] = [h.id == memory_id and "keyword" in h.ranks for h in hits][:1]
        store.close()
    try:
        HybridMemory(path=path, embedding=SeededEmbedding(), embedding_name="seeded-64")
    except StoreError as error:
        seen["embedded"] = str(error)
    print("RESULT " + json.dumps(seen))
    """
).format(repo=str(REPO))


@pytest.mark.server
def test_the_package_serves_memory_and_server_stores_without_fcntl(
    chroma_server: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, chroma_server, str(tmp_path / "path"), str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    seen = json.loads(line[len("RESULT ") :])
    assert seen["memory"] == [True]
    assert seen["server"] == [True]
    # An embedded path needs a file lock: refused when used, saying why and what to use.
    assert "neither fcntl nor msvcrt" in seen["embedded"]
    assert "Chroma server" in seen["embedded"]
