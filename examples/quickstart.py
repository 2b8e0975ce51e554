"""Quickstart: store a few memories on disk, search them, see why each hit came.

Run: python examples/quickstart.py   (offline; the first run loads all-MiniLM-L6-v2)
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta, timezone

from hybrid_memory import HybridMemory

now = datetime.now(timezone.utc)
path = tempfile.mkdtemp(prefix="hybrid-memory-quickstart-")

with HybridMemory(path=path) as memory:
    memory.add_many(
        [
            {
                "text": "Alice prefers dark mode in every editor she uses",
                "tags": ["alice", "ui"],
                "metadata": {"user": "alice"},
                "created_at": now - timedelta(days=30),
            },
            {
                "text": "Alice is allergic to peanuts; never suggest satay",
                "tags": ["alice", "health"],
                "metadata": {"user": "alice"},
            },
            {
                "text": "Bob moved to New York last spring and works remotely",
                "tags": ["bob", "new york"],
                "metadata": {"user": "bob"},
            },
            {
                "text": "Bob's favourite editor theme is Solarized Light",
                "tags": ["bob", "ui"],
                "metadata": {"user": "bob"},
            },
            {
                "text": "The team retro moved to Thursdays at 3pm",
                "tags": ["team"],
                "metadata": {"user": "team"},
            },
        ]
    )
    print(f"{memory.count()} memories stored in {path}\n")

    # A hit's score is its relevance in [0, 1] (its cosine similarity or the share of the
    # query's keywords it holds, whichever is larger, non-increasing down the list); the
    # order comes from Reciprocal Rank Fusion, whose sum is hit.fused_score (1/61 = 0.0164
    # when first in every leg). ranks says where each leg placed it.
    print("score: relevance in [0, 1]; fused: weighted RRF sum; ranks: place in each leg\n")
    for query, options in [
        ("what theme does alice like?", {}),
        ("what editor theme does the user like?", {"filter": {"user": "bob"}}),
        ("where does bob live now?", {}),
        ("food restrictions for dinner planning", {"tags": ["health"]}),
    ]:
        result = memory.search(query, k=3, **options)
        shown = f" {options}" if options else ""
        print(f"Q: {query}{shown}   (alpha={result.alpha}, tags={list(result.matched_tags)})")
        for hit in result:
            print(
                f"  {hit.score:.2f}  fused={hit.fused_score:.4f}  "
                f"ranks={dict(hit.ranks)}  {hit.text}"
            )
        print()

# Reopening the same path finds every memory again.
with HybridMemory(path=path) as memory:
    print(f"reopened: {memory.count()} memories, tags {memory.tags()}")
shutil.rmtree(path)
