"""The benchmark's fixed sizes, paths and the names of the systems it measures."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data"
if str(REPO) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO))
# The entry point, which the orchestrator runs again as a worker for each system.
SCRIPT = Path(__file__).resolve().parents[1] / "scale.py"

DIM = 384
K = 10
SEED = 20240501
WARMUP_QUERIES = 5
# Questions asked once after the timed ones, each stage of hybrid-memory's search timed:
# where a question's first search spends its time (the timed figures are first searches).
STAGE_QUERIES = 200
FILTER_USERS = 50
# Chroma persists a disk store's HNSW index every this many records written
# (``hnsw:sync_threshold``, default 1,000), and its add costs more the more records wait
# for that: 9.5 ms with ~100 waiting and 19 ms with ~800, at 100,000 memories. The timed
# single adds are spread over one such cycle (see worker.run_worker).
CHROMA_SYNC_CYCLE = 1000
# A store's ingest goes in blocks of at most this many memories (at least ten blocks), one
# turn each in a paired run: the systems then meet the same minutes while ingesting too,
# as they do for everything else (one turn for a whole ingest of 100,000 memories was two
# minutes, over which this machine's speed moves).
INGEST_BLOCK = 10_000
INGEST_BLOCKS_AT_LEAST = 10

OURS_DISK = "ours-disk"
OURS_MEMORY = "ours-memory"
CHROMA_DISK = "chroma-disk"
CHROMA_MEMORY = "chroma-memory"
CHROMA_LAYOUT = "chroma-disk-layout"  # only when asked for with --systems
LANGCHAIN = "langchain"
LLAMAINDEX = "llamaindex"
MODEL = "model"
# The memory services run from their own virtual environments (hybrid_memory_eval.foreign).
MEM0 = "mem0"
MCP_MEMORY_SERVICE = "mcp-memory-service"

LABELS = {
    OURS_DISK: "hybrid-memory (disk)",
    OURS_MEMORY: "hybrid-memory (memory)",
    CHROMA_DISK: "Chroma add+query (disk)",
    CHROMA_MEMORY: "Chroma add+query (memory)",
    CHROMA_LAYOUT: "Chroma add+query, hybrid-memory's metadata layout (disk)",
    LANGCHAIN: "LangChain Ensemble (memory)",
    LLAMAINDEX: "LlamaIndex Fusion (memory)",
    MEM0: "mem0, infer=False (Chroma, disk)",
    MCP_MEMORY_SERVICE: "mcp-memory-service (sqlite-vec, disk)",
}
OURS = (OURS_DISK, OURS_MEMORY)
PEER_SYSTEMS = (LANGCHAIN, LLAMAINDEX)
FOREIGN_SYSTEMS = (MEM0, MCP_MEMORY_SERVICE)
# Systems that index "<tags>: <text>" (they have no tags of their own to search).
PEER_TEXT_SYSTEMS = PEER_SYSTEMS + FOREIGN_SYSTEMS
