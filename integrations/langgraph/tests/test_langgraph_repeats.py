"""A LangGraph store keeps every item it is given and returns every match, as
LangGraph's own stores do, whatever the memory's settings say about near-duplicates:
a put is an upsert by key (never skipped as a repeat), and a search does not fold
items that say nearly the same thing into one (LangMem's memory manager, say, consolidates
them by key)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.store.hybrid_memory import HybridMemoryStore

from hybrid_memory import HybridMemory

pytestmark = pytest.mark.slow  # the real embedding model

FACT = "Alice is allergic to peanuts"


@pytest.fixture(scope="module")
def embedder() -> Any:
    memory = HybridMemory()
    memory.embedder.embed_query("warm up")
    yield memory.embedder
    memory.close()


def test_repeats_are_kept_and_each_is_a_result(tmp_path: Path, embedder: Any) -> None:
    # Settings that would skip repeats and fold them in a search of the memory itself.
    with HybridMemoryStore(
        path=tmp_path / "memory", embedding=embedder, on_similar="skip", collapse_similar=True
    ) as store:
        namespace = ("users", "alice")
        store.put(namespace, "allergy", {"text": FACT})
        store.put(namespace, "allergy-again", {"text": f"{FACT} (confirmed again)"})
        store.put(namespace, "allergy-dated", {"text": f"2026-10-13: {FACT}"})
        store.put(namespace, "drink", {"text": "Alice drinks oat milk"})
        assert store.get(namespace, "allergy-again") is not None
        assert store.get(namespace, "allergy-dated") is not None
        found = store.search(namespace, query="what is alice allergic to", limit=4)
        assert {item.key for item in found} == {
            "allergy",
            "allergy-again",
            "allergy-dated",
            "drink",
        }
        scores = [item.score for item in found]
        assert scores == sorted(scores, reverse=True)
        # The memory underneath folds them, as its settings say.
        hits = store.memory.search("what is alice allergic to", k=4)
        assert sum("peanuts" in h.text for h in hits) == 1
