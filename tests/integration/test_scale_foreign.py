"""mem0 and mcp-memory-service as systems of the scale benchmark (``benchmarks/_scale/
foreign.py``): the real libraries in their own venvs, through the evaluation's drivers,
doing what the benchmark times. Skipped (with the command that builds it) when a peer's
venv is not built; CI builds both."""

from __future__ import annotations

from pathlib import Path

import pytest
from hybrid_memory_eval.foreign import FOREIGN_PEERS, not_ready_reason

from benchmarks._scale.constants import MCP_MEMORY_SERVICE, MEM0, K
from benchmarks._scale.embedding import HashingEmbedding, TableEmbedding
from benchmarks._scale.foreign import ForeignSystem

pytestmark = pytest.mark.slow

TOPICS = ["hiking", "sourdough", "chess", "cello", "tomatoes", "marathon", "budget", "lisbon"]


def memories(count: int, prefix: str = "mem") -> list[dict]:
    return [
        {
            "id": f"{prefix}-{i}",
            "text": f"Note {i}: talked about {TOPICS[i % len(TOPICS)]} and item {i * 7}",
            "tags": [],
            "metadata": {"user": f"user-{i % 3}", "importance": 0.5},
        }
        for i in range(count)
    ]


@pytest.fixture(
    params=[
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                not_ready_reason(name) is not None, reason=f"{name}: {not_ready_reason(name)}"
            ),
        )
        for name in FOREIGN_PEERS
    ]
)
def system(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the driver's store, deleted on close
    cheap = HashingEmbedding()
    # No text is in the table: every one is embedded by the cheap embedding on the spot.
    embedding = TableEmbedding(["-"], cheap.embed_array(["-"]), cheap.embed_array, "hashing")
    made = ForeignSystem(request.param, embedding)
    yield made
    made.close()


def test_ingest_add_one_search_filter_and_memory(system: ForeignSystem) -> None:
    assert system.name in (MEM0, MCP_MEMORY_SERVICE)
    assert system.info["library"] in ("mem0ai", "mcp-memory-service")
    before = system.rss(reset=True)
    system.ingest(memories(30))
    assert system.count() == 30
    assert (system.library_seconds() or 0) > 0  # timed inside the driver

    new = memories(1, prefix="new")[0] | {"text": "Adopted a golden retriever named Biscuit"}
    system.add_one(new)
    assert system.refused == []
    assert system.search(new["text"])[0] == "new-0"
    assert (system.library_seconds() or 0) > 0

    filtered = system.search("talked about chess", {"user": "user-1"})
    assert filtered, "a filtered search found nothing"
    assert all(int(i.split("-")[1]) % 3 == 1 for i in filtered if i.startswith("mem-"))
    assert len(system.search("talked about chess")) == K

    after = system.rss()
    assert before["current_mb"] > 20 and after["peak_mb"] >= before["current_mb"]
