"""A reopened store's first searches: how long its keyword postings take to build on
their thread, then the first search naming each of its most carried tags against the
same search asked again.

A store reopened (a new process, a restart) rebuilds its in-memory parts from its files.
Until the postings are built, FTS5 ranks the keyword leg; with them come every tag's
carriers (when they fit), read from the same snapshot, so that no later search reads a
tag's carriers itself (at a million memories that read took the first search naming a
tag 76-367 ms). Figures only, no assertions; the load average is printed beside them.

Run it on a store kept by the scale benchmark (its hashing vectors; no model needed); it
imports the ``hybrid_memory`` of its own checkout, so run each checkout's copy to compare:

    python benchmarks/scale.py --n 1000000 --systems ours-disk --keep /tmp/kept
    python benchmarks/reopened_store.py /tmp/kept/ours-disk-1000000/store
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scale.embedding import HashingEmbedding, TableEmbedding

import hybrid_memory
from hybrid_memory import HybridMemory
from hybrid_memory.testing import keyword_postings_built

# The scale benchmark's stores were written under this embedding's name.
SCALE_EMBEDDING = f"{TableEmbedding.__module__}.{TableEmbedding.__qualname__}"


def most_carried(store: Path, count: int) -> list[tuple[str, int]]:
    """The ``count`` tags with the most carriers in the store's keyword index file."""
    index = next(store.glob("keyword-*.sqlite3"))
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        return conn.execute(
            "SELECT tag, COUNT(*) AS n FROM memory_tags GROUP BY tag ORDER BY n DESC LIMIT ?",
            (count,),
        ).fetchall()


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a store directory (scale.py --keep)")
    parser.add_argument("--tags", type=int, default=10, help="most carried tags to ask for")
    args = parser.parse_args()
    tags = most_carried(args.store, args.tags)
    print(f"hybrid_memory from {Path(hybrid_memory.__file__).parent}")
    print(f"load average {os.getloadavg()[0]:.2f}")

    start = time.perf_counter()
    memory = HybridMemory(
        path=str(args.store), embedding=HashingEmbedding(), embedding_name=SCALE_EMBEDDING
    )
    print(f"open: {time.perf_counter() - start:.1f} s, {memory.count()} memories")
    start, searches = time.perf_counter(), 0
    while not keyword_postings_built(memory):
        memory.search("a quiet evening walk", k=10)  # FTS5 ranks meanwhile
        searches += 1
        time.sleep(0.05)
    print(f"postings built: {time.perf_counter() - start:.1f} s ({searches} searches meanwhile)")
    time.sleep(2)  # the compiled keyword loops load in the background too

    print(f"{'tag':16s} {'carriers':>9s} {'first ms':>9s} {'again ms':>9s}")
    for tag, carriers in tags:
        question = f"What did {tag} say about the trip last weekend?"
        timed = []
        for _ in range(2):
            start = time.perf_counter()
            hits = memory.search(question, k=10)
            timed.append((time.perf_counter() - start) * 1e3)
        assert tag in hits.matched_tags, (tag, hits.matched_tags)
        print(f"{tag:16s} {carriers:9d} {timed[0]:9.1f} {timed[1]:9.1f}")
    print(f"RSS {rss_mb():.0f} MB; load average {os.getloadavg()[0]:.2f}")
    memory.close()


if __name__ == "__main__":
    main()
