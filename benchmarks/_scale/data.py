"""The data: memories generated from real sentences, the queries, and their vectors,
prepared once per N and loaded by every worker."""

from __future__ import annotations

import json
import random
import statistics
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .constants import FILTER_USERS, SEED, STAGE_QUERIES, WARMUP_QUERIES
from .embedding import HashingEmbedding

TOPIC_TAGS = (
    "preference", "fact", "event", "plan", "todo", "important", "work", "family",
    "health", "travel", "hobby", "research", "reading", "project", "idea", "reminder",
)  # fmt: skip


# Topic tags of Cranfield sentences (phrase found in the sentence -> tag), so that tag
# frequencies look like a real store's: each on a few percent of the memories.
CRANFIELD_TAGS = (
    ("boundary layer", "boundary layer"), ("heat transfer", "heat transfer"),
    ("supersonic", "supersonic"), ("hypersonic", "hypersonic"), ("shock", "shock waves"),
    ("wing", "wings"), ("buckling", "structures"), ("shell", "structures"),
    ("turbulen", "turbulence"), ("laminar", "laminar flow"), ("nozzle", "nozzles"),
    ("flutter", "aeroelasticity"), ("experiment", "experiments"), ("cylinder", "cylinders"),
)  # fmt: skip


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_sources(data: Path) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Sentence pools (LoCoMo turns by conversation, Cranfield sentences by abstract)."""
    pools: dict[str, list[dict[str, Any]]] = {}
    for row in _read_jsonl(data / "locomo" / "corpus.jsonl"):
        conversation = row.get("metadata", {}).get("conversation", "locomo")
        pools.setdefault(f"locomo:{conversation}", []).append(
            {
                "text": row["text"].strip(),
                "tags": [t.lower() for t in row.get("tags", [])],
                "session": row.get("metadata", {}).get("session", 0),
            }
        )
    cranfield = []
    for row in _read_jsonl(data / "cranfield" / "corpus.jsonl"):
        sentences = [s.strip(" .") for s in row["text"].split(" . ")]
        for sentence in sentences:
            if len(sentence.split()) >= 4:
                tags = [tag for phrase, tag in CRANFIELD_TAGS if phrase in sentence]
                cranfield.append({"text": sentence + ".", "tags": tags, "session": 0})
    pools["cranfield"] = cranfield
    queries: list[str] = []
    seen: set[str] = set()
    locomo_q = [q["text"] for q in _read_jsonl(data / "locomo" / "queries.jsonl")]
    cranfield_q = [q["text"] for q in _read_jsonl(data / "cranfield" / "queries.jsonl")]
    # Interleave about 3:1 (the collections' sizes) so any prefix mixes both styles.
    ci = 0
    for i, q in enumerate(locomo_q):
        for text in [q] + ([cranfield_q[ci]] if i % 3 == 2 and ci < len(cranfield_q) else []):
            if text not in seen:
                seen.add(text)
                queries.append(text)
        if i % 3 == 2:
            ci += 1
    for text in cranfield_q[ci:]:
        if text not in seen:
            seen.add(text)
            queries.append(text)
    return pools, queries


def generate_memories(
    pools: dict[str, list[dict[str, Any]]], count: int, seed: int = SEED
) -> list[dict[str, Any]]:
    """``count`` distinct memories, deterministic for a seed; a prefix of a longer run."""
    rng = random.Random(seed)
    names = sorted(pools)
    # Half conversation (each LoCoMo conversation by its size), half document notes.
    locomo = sum(len(pools[n]) for n in names if n != "cranfield")
    weights = [0.5 if n == "cranfield" else 0.5 * len(pools[n]) / locomo for n in names]
    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    span = timedelta(days=730).total_seconds()
    seen: set[str] = set()
    memories: list[dict[str, Any]] = []
    # Creation times grow with the index (a store fills over time) on a fixed scale,
    # so the prefix property holds for every N.
    step = span / 200_000
    while len(memories) < count:
        pool_name = rng.choices(names, weights)[0]
        pool = pools[pool_name]
        parts = rng.choices((1, 2, 3), (0.4, 0.5, 0.1))[0]
        picked = [pool[rng.randrange(len(pool))] for _ in range(parts)]
        text = " ".join(p["text"] for p in picked)
        if text in seen:
            continue
        seen.add(text)
        i = len(memories)
        tags = sorted({t for p in picked for t in p["tags"]})
        tags += rng.sample(TOPIC_TAGS, rng.choices((0, 1, 2), (0.3, 0.5, 0.2))[0])
        source = "cranfield" if pool_name == "cranfield" else "locomo"
        memories.append(
            {
                "id": f"mem-{i:07d}",
                "text": text,
                "tags": tags,
                "metadata": {
                    "user": f"user-{rng.randrange(FILTER_USERS):02d}",
                    "source": source,
                    "conversation": pool_name.split(":", 1)[-1],
                    "session": int(picked[0]["session"]),
                    "importance": round(rng.random(), 2),
                },
                "created_at": (
                    start + timedelta(seconds=(i % 200_000) * step + rng.random() * step)
                ).isoformat(),
            }
        )
    return memories


def peer_text_of(memory: dict[str, Any]) -> str:
    from hybrid_memory_eval import PeerRecord, peer_text

    return peer_text(PeerRecord(memory["id"], memory["text"], tuple(memory["tags"])))


def prepare(
    data: Path, n: int, adds: int, queries: int, workdir: Path, peers: bool = True
) -> dict[str, Any]:
    """Write the store, the extra memories, the queries and their vectors for one N (the
    peers' texts, "<tags>: <text>", are embedded only when ``peers`` run: at a million
    memories that is a million more)."""
    pools, all_queries = load_sources(data)
    need = WARMUP_QUERIES + queries
    if len(all_queries) < need:
        raise SystemExit(f"only {len(all_queries)} distinct queries, asked for {need}")
    memories = generate_memories(pools, n + adds)
    store, extra = memories[:n], memories[n:]
    for i, memory in enumerate(extra):
        memory["id"] = f"new-{i:04d}"
        # A metadata value no other memory has, so that a filtered search can check
        # each leg separately, whatever the fusion makes of the ranks.
        memory["metadata"]["probe"] = memory["id"]
    chosen = all_queries[:need]
    # Questions asked once, after the timed ones, for where a first search spends its time
    # (as many of STAGE_QUERIES as are left).
    fresh = all_queries[need : need + STAGE_QUERIES]
    embedder = HashingEmbedding()
    start = time.perf_counter()
    texts = [m["text"] for m in memories]
    vectors = embedder.embed_array(texts + chosen + fresh)
    peer_vectors = None
    if peers:
        peer_vectors = embedder.embed_array([peer_text_of(m) for m in memories] + chosen + fresh)
    embed_seconds = time.perf_counter() - start
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "data.json").write_text(
        json.dumps(
            {
                "store": store,
                "extra": extra,
                "warmup": chosen[:WARMUP_QUERIES],
                "queries": chosen[WARMUP_QUERIES:],
                "stage_queries": fresh,
                "embedding": embedder.name,
            }
        ),
        encoding="utf-8",
    )
    np.save(workdir / "vectors.npy", vectors)
    if peer_vectors is not None:
        np.save(workdir / "peer_vectors.npy", peer_vectors)
    embedded = len(vectors) + (0 if peer_vectors is None else len(peer_vectors))
    return {
        "embedding": embedder.name,
        "cheap_embedding_texts_per_s": round(embedded / embed_seconds),
        "mean_chars": round(statistics.fmean(len(t) for t in texts)),
        "distinct_tags": len({t for m in store for t in m["tags"]}),
    }


def load_prepared(workdir: Path, peer: bool) -> tuple[dict[str, Any], np.ndarray, list[str]]:
    """The prepared data, the vectors a system needs, and the text of each vector's row
    (the peers index "<tags>: <text>")."""
    data = json.loads((workdir / "data.json").read_text(encoding="utf-8"))
    memories = data["store"] + data["extra"]
    queries = data["warmup"] + data["queries"] + data["stage_queries"]
    if peer:
        keys = [peer_text_of(m) for m in memories] + queries
        return data, np.load(workdir / "peer_vectors.npy"), keys
    return data, np.load(workdir / "vectors.npy"), [m["text"] for m in memories] + queries
