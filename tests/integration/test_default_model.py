"""The default embedding model, all-MiniLM-L6-v2, loaded offline from its package."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hybrid_memory import HybridMemory

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store() -> HybridMemory:
    memory = HybridMemory()
    memory.add_many(
        [
            {"text": "Alice prefers dark mode in every editor", "tags": ["alice"]},
            {"text": "The cat sleeps on the warm windowsill", "tags": ["pets"]},
            {"text": "Quarterly revenue grew by twelve percent", "tags": ["finance"]},
        ]
    )
    return memory


def test_default_model_is_the_bundled_minilm(store: HybridMemory) -> None:
    assert store.embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(store.embedder.embed_query("hello")) == 384


def test_semantic_match_without_shared_words(store: HybridMemory) -> None:
    hits = store.search("which colour scheme does she like for coding?", k=1, alpha=1.0)
    assert hits[0].text.startswith("Alice prefers dark mode")
    hits = store.search("earnings went up", k=1, alpha=1.0)
    assert hits[0].text.startswith("Quarterly revenue")


def test_works_with_the_hub_unreachable() -> None:
    # No network, and the hub pointed at an address that refuses connections.
    script = (
        "from hybrid_memory import HybridMemory\n"
        "m = HybridMemory(); m.add('offline works'); print(m.search('offline')[0].text)"
    )
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("offline works")
