"""Where ``benchmarks/scale.py`` finds a memory that its own text missed in the top 10
(``missed_after_add``): hybrid-memory and Chroma alone, on small real stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks._scale.constants import K
from benchmarks._scale.embedding import HashingEmbedding, TableEmbedding
from benchmarks._scale.systems import DEEP, ChromaOnly, Ours


def _memories(n: int) -> list[dict[str, Any]]:
    topics = ["wind tunnel", "boundary layer", "hiking trip", "guitar lesson", "tax form"]
    return [
        {
            "id": f"mem-{i:03d}",
            "text": f"note {i} about the {topics[i % len(topics)]} and item {i * 7 % 13}",
            "tags": ["work"] if i % 2 else [],
            "metadata": {"user": f"user-{i % 3}", "probe": f"mem-{i:03d}"},
            "created_at": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
        }
        for i in range(n)
    ]


def _embedding(memories: list[dict[str, Any]]) -> TableEmbedding:
    texts = [m["text"] for m in memories]
    hashing = HashingEmbedding()
    return TableEmbedding(texts, hashing.embed_array(texts), hashing.embed_array, name="hash")


@pytest.mark.parametrize("system", ["ours", "chroma"])
def test_a_memory_is_located_below_the_top_k_or_reported_absent(
    tmp_path: Path, system: str
) -> None:
    memories = _memories(150)
    embedding = _embedding(memories)
    built = (
        Ours(embedding, tmp_path / "store")
        if system == "ours"
        else ChromaOnly(embedding, tmp_path / "chroma")
    )
    try:
        built.ingest(memories[:-1])
        built.add_one(memories[-1])
        own = built.miss_detail(memories[-1])
        assert own["probe"] == "mem-149"
        assert own["rank"] == 1  # its own text: first, so nothing is missing
        # A memory ranked far down for a query (the last of the first DEEP hits)...
        query = memories[0]["text"]
        ranked = built.search(query)
        assert len(ranked) == K
        deep = (
            [h.id for h in built.memory.search(query, k=DEEP)]
            if isinstance(built, Ours)
            else built.deep(query)
        )
        assert len(deep) == DEEP
        far = memories[0]  # asked for by its text, which ranks ``wanted`` last of DEEP
        if isinstance(built, Ours):
            # The ingest keeps no map of the ids it was given: name this one.
            built.ids["far"] = deep[-1]
            wanted = "far"
        else:
            wanted = deep[-1]
        found = built.miss_detail({**far, "id": wanted})
        assert found["rank"] == DEEP
        if isinstance(built, Ours):
            assert found["leg_ranks"], found  # some leg ranked it
            assert found["fused_score"] <= found["kth_fused_score"]
        # ...and one that is not stored at all: absent, not an error.
        if isinstance(built, Ours):
            built.ids["nowhere"] = "0" * 32
        gone = built.miss_detail({**far, "id": "nowhere"})
        assert gone["rank"] is None
    finally:
        built.close()
