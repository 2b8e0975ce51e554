"""Export and import rates (issue 42): memories per second through the command line, as a
user runs it, with and without re-embedding.

Usage::

    python benchmarks/transfer.py --n 100000              # the issue's size
    python benchmarks/transfer.py --n 2000 --model-n 50   # a quick run
    python benchmarks/transfer.py --n 10000 --json        # one JSON document on stdout
    python benchmarks/transfer.py --n 100000 --save benchmarks/results/transfer-100k.json

What it does:

1. Fills a store on a temporary path with ``--n`` memories (a tenth of them in a
   namespace, a tenth of those in a namespace under it), each with tags, metadata and its
   own creation time, embedded by the seeded embedding of ``benchmarks/seeded_embedding.py``
   at 384 dimensions (MiniLM's size): what is measured is the store and the format, not
   a model. The store is closed before the commands run.
2. Runs ``hybrid-memory export`` (as ``python -m hybrid_memory``, a fresh process) with
   and without ``--vectors``, then ``hybrid-memory import`` of the file with vectors into
   a new path (no re-embedding: the file's model is the store's), again into the same
   path (every memory unchanged), and of the file without vectors into a new path (the
   seeded embedding embeds every text: the pipeline's own cost when embedding is
   nearly free).
3. Chroma's own upsert of the same records (``chromadb`` alone, batches of 1,000, only
   the upserts timed), the floor under any import on this machine at this moment: the
   import's rate is also printed as a share of it, which stays meaningful when other
   work on the machine moves both.
4. Re-embedding with the real default model (all-MiniLM-L6-v2): ``import --re-embed``
   of the first ``--model-n`` memories of the export into a store on the default model.

Each rate is the command's own count over its own time (its ``--json`` summary: from the
store opened to the last line written), the process's start-up apart; the wall time of
the whole command and the process's peak memory (max RSS) are printed beside it, so that
an export or import that held every memory would show. The targets (issue 42): export
and import without re-embedding at >= 1,000 memories/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.seeded_embedding import SeededEmbedding  # noqa: E402

DIMENSION = 384
#: The embedding of the commands, named to them by ``--embedding``.
SEEDED_384 = SeededEmbedding(DIMENSION)
SEEDED = [
    "--embedding",
    "benchmarks.transfer:SEEDED_384",
    "--embedding-name",
    f"seeded-{DIMENSION}",
]
TARGET = 1000.0  # memories/s, export and import without re-embedding
_VOCABULARY = (
    "alice bob carol deploy key rotate server theme dark light mode standup meeting "
    "invoice budget travel flight hotel paris berlin tokyo python rust chroma index "
    "memory agent prefers likes dislikes every monday friday morning evening project "
    "launch review notes birthday coffee tea garden piano guitar marathon doctor"
)


def memories(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = _VOCABULARY.split()
    start = 1_600_000_000.0
    return [
        {
            "id": f"m{i:07d}",
            "text": f"memory {i}: " + " ".join(rng.choices(words, k=rng.randint(8, 20))),
            "tags": rng.sample(["work", "home", "travel", "health", "music", "ops"], 2),
            "metadata": {"user": f"u{i % 50}", "importance": round(rng.random(), 2)},
            "created_at": start + i * 60.0 + rng.random(),
        }
        for i in range(n)
    ]


def fill(path: Path, n: int, seed: int) -> dict[str, int]:
    from hybrid_memory import HybridMemory

    items = memories(n, seed)
    inner = n // 10
    deepest = inner // 10
    embedding = SeededEmbedding(DIMENSION)
    with HybridMemory(
        path=str(path), embedding=embedding, embedding_name=f"seeded-{DIMENSION}"
    ) as store:
        store.add_many(items[: n - inner])
        team = store.namespace("team")
        team.add_many(items[n - inner : n - deepest])
        team.namespace("alice").add_many(items[n - deepest :])
        return {"store": n - inner, "team": inner - deepest, "team/alice": deepest}


# The command, run as ``python -m hybrid_memory`` runs it, reporting its own peak memory:
# VmHWM, the high-water mark of this process's memory (getrusage's ru_maxrss would carry
# the parent's over fork and exec).
_LAUNCH = (
    "import atexit, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write('\\nmax_rss_kb=%s\\n' % line.split()[1])\n"
    "atexit.register(peak)\n"
    "from hybrid_memory.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def command(*args: str) -> dict[str, Any]:
    """Run ``hybrid-memory ARGS --json`` in a fresh process: its summary, its wall time
    and its peak memory."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCH, *args, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "HYBRID_MEMORY_SYNC_INTERVAL": "5"},
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"hybrid-memory {' '.join(args)} failed:\n{done.stderr}")
    summary: dict[str, Any] = json.loads(done.stdout)
    summary["wall_seconds"] = round(wall, 2)
    peak = done.stderr.rsplit("max_rss_kb=", 1)[-1].strip()
    summary["max_rss_mb"] = round(int(peak) / 1024, 1)
    return summary


def chroma_baseline(path: Path, exported: Path, batch: int = 1000) -> dict[str, Any]:
    """Chroma's own write of the same records, for scale: the export's memories (text,
    vector, metadata in hybrid-memory's layout) upserted by ``chromadb`` alone, a batch
    of 1,000 at a time, into a new collection; only the upserts are timed."""
    import base64

    import chromadb
    import numpy as np

    client = chromadb.PersistentClient(path=str(path))
    collection = client.get_or_create_collection(
        "baseline", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    seconds = 0.0
    count = 0
    with exported.open() as lines:
        next(lines)  # the header
        while True:
            records = [json.loads(line) for _, line in zip(range(batch), lines, strict=False)]
            if not records:
                break
            vectors = np.stack(
                [np.frombuffer(base64.b64decode(r["vector"]), dtype="<f4") for r in records]
            )
            metadatas = [
                {
                    **r["metadata"],
                    "hm:tags": json.dumps(r["tags"]),
                    "hm:created_at": 1.0 + n,
                    "hm:updated_at": 1.0 + n,
                }
                for n, r in enumerate(records)
            ]
            started = time.perf_counter()
            collection.upsert(
                ids=[f"{r['namespace']}{r['id']}" for r in records],
                embeddings=vectors,
                documents=[r["text"] for r in records],
                metadatas=metadatas,
            )
            seconds += time.perf_counter() - started
            count += len(records)
    return {"count": count, "seconds": round(seconds, 2)}


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100,000)")
    parser.add_argument(
        "--model-n", type=int, default=200, help="memories re-embedded by the real model"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--skip-seeded", action="store_true", help="skip the import that embeds every text"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--save", type=Path, metavar="FILE", help="also write the JSON here")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="hm-transfer-"))
    results: dict[str, Any] = {"n": args.n, "dimension": DIMENSION, "target_per_s": TARGET}
    try:
        started = time.perf_counter()
        results["layout"] = fill(work / "source", args.n, args.seed)
        results["fill_seconds"] = round(time.perf_counter() - started, 1)
        source = ["--path", str(work / "source"), *SEEDED]
        plain, vectors = work / "plain.jsonl", work / "vectors.jsonl"

        runs: dict[str, dict[str, Any]] = {}
        runs["export"] = command("export", str(plain), *source)
        runs["export --vectors"] = command("export", str(vectors), "--vectors", *source)
        target = ["--path", str(work / "target"), *SEEDED]
        runs["import (file's vectors)"] = command("import", str(vectors), *target)
        # Right after the import, so that both meet the same load on the machine.
        runs["Chroma's own upsert (baseline)"] = chroma_baseline(work / "baseline", vectors)
        runs["import again (unchanged)"] = command("import", str(vectors), *target)
        if not args.skip_seeded:
            embedded = ["--path", str(work / "embedded"), *SEEDED]
            runs["import (seeded embedding)"] = command("import", str(plain), *embedded)
        if args.model_n:
            head = work / "head.jsonl"
            with vectors.open() as full, head.open("w") as part:
                for number, line in enumerate(full):
                    if number > args.model_n:
                        break
                    part.write(line)
            model = ["--path", str(work / "model")]
            runs["import --re-embed (default model)"] = command(
                "import", str(head), "--re-embed", *model
            )
        for run in runs.values():
            count = run.setdefault("count", run.get("memories", run.get("read", 0)))
            run["per_s"] = round(rate(count, run["seconds"]), 1)
        results["runs"] = runs
        results["file_mb"] = {
            "plain": round(plain.stat().st_size / 1e6, 1),
            "vectors": round(vectors.stat().st_size / 1e6, 1),
        }
        checked = {
            "export": runs["export"]["per_s"] >= TARGET,
            "export --vectors": runs["export --vectors"]["per_s"] >= TARGET,
            "import (file's vectors)": runs["import (file's vectors)"]["per_s"] >= TARGET,
        }
        results["meets_target"] = checked
        baseline = runs["Chroma's own upsert (baseline)"]["per_s"]
        results["import_share_of_chroma"] = round(
            runs["import (file's vectors)"]["per_s"] / baseline, 3
        )
        imported = runs["import (file's vectors)"]
        assert imported["added"] == args.n and imported["embedded"] == 0, imported
        assert runs["import again (unchanged)"]["unchanged"] == args.n
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    if args.save:
        args.save.write_text(json.dumps(results, indent=2) + "\n")
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{args.n:,} memories ({DIMENSION} dimensions), filled in {results['fill_seconds']} s;")
    print(
        f"files: {results['file_mb']['plain']} MB plain, "
        f"{results['file_mb']['vectors']} MB with vectors"
    )
    print(
        f"{'run':36} {'memories':>9} {'seconds':>8} {'per s':>9} {'wall s':>7} {'max RSS MB':>10}"
    )
    for name, run in results["runs"].items():
        print(
            f"{name:36} {run['count']:>9,} {run['seconds']:>8.1f} {run['per_s']:>9,.0f} "
            f"{run.get('wall_seconds', 0):>7.1f} {run.get('max_rss_mb', 0):>10.0f}"
        )
    verdict = ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in checked.items())
    print(f">= {TARGET:,.0f}/s without re-embedding: {verdict}")
    share = results["import_share_of_chroma"]
    print(f"import with the file's vectors runs at {share:.0%} of Chroma's own upsert rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
