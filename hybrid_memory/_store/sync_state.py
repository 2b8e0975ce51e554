"""The state :class:`~hybrid_memory._store.sync.IndexSync` keeps (set in its
``__init__``), declared once for the parts it is assembled from, each of which reads and
sets it."""

from __future__ import annotations

import threading

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.tags import TagCache
from hybrid_memory._store.chroma_log import LogPosition
from hybrid_memory._store.collection import ChromaCollection


class SyncState:
    """Declarations only: what an index sync holds."""

    _collection: ChromaCollection
    _index: KeywordIndex
    _tags: TagCache
    _lock: threading.RLock
    _log: LogPosition | None
    _late_commits: float
    settled: float | None
    last_check: float
    closed: bool
    _in_step_marker: int | None
    in_step_write_count: int | None
    _in_step_position: str | None
    _writes: int
    _restored: bool
    _warm_thread: threading.Thread | None
    _warmed: int
    _to_warm: int
