"""One loaded default embedding model for the whole session, and a fresh store on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The real default embedder (all-MiniLM-L6-v2, offline), loaded once per session.

    Stores opened with it record the same model name as ``HybridMemory()``'s default,
    so a store written here reopens with the default embedding, and vice versa."""
    store = HybridMemory()
    embedder = store.embedder
    store.close()
    embedder.embed_query("load the model now")
    return embedder


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def store(store_path: Path, minilm: Any) -> Iterator[HybridMemory]:
    """A persistent store (real Chroma and SQLite in a temporary directory)."""
    memory = HybridMemory(path=store_path, embedding=minilm)
    yield memory
    memory.close()
