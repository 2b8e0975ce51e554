"""The values the public API hands back: memories, hits, and a search result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: The names of the three retrieval legs, as they appear in ``Hit.ranks`` and ``Hit.scores``.
VECTOR = "vector"
KEYWORD = "keyword"
TAG = "tag"
LEGS = (VECTOR, KEYWORD, TAG)


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored memory. Tags are normalised; times are timezone-aware UTC."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def supersedes(self) -> str | None:
        """The id of the memory this one supersedes (metadata ``supersedes``), or None."""
        value = self.metadata.get("supersedes")
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Hit:
    """A search hit: the memory, how relevant it is, and why it came.

    ``score`` is the relevance in [0, 1], to threshold: the larger of the query's cosine
    similarity with the memory and the share of the query's keywords the memory holds,
    made non-increasing down the fused order (see :mod:`hybrid_memory._search.relevance` and
    docs/architecture.md, "Scores"). A near-exact match scores close to 1, an unrelated
    memory low, whatever else the store holds.

    ``fused_score`` is the weighted Reciprocal Rank Fusion value that orders the hits
    (about 0.016 at most with the default ``rrf_k``, up to ``1 + lift`` times that with
    ``keyword_score_lift`` / ``vector_score_lift``; compare it within one result only).
    ``ranks`` maps each leg that returned the memory to its 1-based rank there;
    ``scores`` maps it to the leg's raw score (cosine similarity for ``vector``,
    BM25 for ``keyword``, the number of matched query tags for ``tag``).

    ``superseded_by`` is the id of the newest memory that supersedes this one (its
    metadata ``supersedes`` names this memory: ``add(..., supersedes=ID)``), None when
    nothing does. A superseded memory still comes back, ranked lower
    (``supersede_factor``).

    ``similar_ids`` are the memories that say nearly the same thing as this one and were
    collapsed into this hit (setting ``collapse_similar``), best fused first: this hit
    stands for them all (the best ranked, a superseding one before those it supersedes),
    with the fused score and relevance of the best of them. Empty when
    nothing was collapsed into it.
    """

    memory: Memory
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    scores: Mapping[str, float] = field(default_factory=dict)
    fused_score: float = 0.0
    superseded_by: str | None = None
    similar_ids: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """The memory's id."""
        return self.memory.id

    @property
    def text(self) -> str:
        """The memory's text."""
        return self.memory.text

    @property
    def tags(self) -> tuple[str, ...]:
        """The memory's tags."""
        return self.memory.tags

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The memory's metadata."""
        return self.memory.metadata

    @property
    def supersedes(self) -> str | None:
        """The id of the memory this one supersedes (its metadata ``supersedes``), or None."""
        return self.memory.supersedes


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """The time a search was limited to or favoured, and where it came from.

    ``phrase`` is the query's words that named it ("last week", "in March", "before I
    moved"), or None when the caller passed ``after``/``before``. ``kind`` is
    ``"window"`` (a range: ``start`` inclusive, ``end`` exclusive, either may be None
    for an open end), ``"newest"`` or ``"oldest"`` (a phrase such as "currently" or
    "the first time" that asks for the latest or earliest memories, with no range).
    ``applied`` says what the search did with it: ``"filter"`` (only memories inside,
    on every leg before its cut: ``after``/``before``, or ``time_phrases="narrow"``),
    ``"boost"`` (memories inside rank higher, the others still come) or ``"order"``
    (newer, or older, memories rank higher), or ``"none"`` (read but not applied: an
    order word while ``time_order_weight`` is 0, or an event no memory matched).
    ``anchor`` is the event of a "before/after <event>" phrase, and ``anchor_id`` the
    memory whose time stood for it.
    """

    phrase: str | None
    kind: str
    start: datetime | None = None
    end: datetime | None = None
    applied: str = "filter"
    anchor: str | None = None
    anchor_id: str | None = None


class SearchResult(list[Hit]):
    """The hits of one search, best first, plus how the search went.

    ``fallback_mode`` is True when the query could not be embedded (for example a
    remote embedding API was down) and the hits come from the keyword and tag legs
    only; ``fallback_reason`` then says why. ``alpha`` is the vector share used,
    ``matched_tags`` the known tags found in (or given with) the query.
    ``time_window`` is the time the search was limited to or favoured (a
    :class:`TimeWindow`: from ``after``/``before``, or a time the query named, such as
    "last week"), None when there was none.
    """

    def __init__(
        self,
        hits: list[Hit] | None = None,
        *,
        alpha: float = 0.0,
        matched_tags: tuple[str, ...] = (),
        fallback_mode: bool = False,
        fallback_reason: str | None = None,
        time_window: TimeWindow | None = None,
    ) -> None:
        super().__init__(hits or [])
        self.alpha = alpha
        self.matched_tags = matched_tags
        self.fallback_mode = fallback_mode
        self.fallback_reason = fallback_reason
        self.time_window = time_window

    def __repr__(self) -> str:
        return (
            f"SearchResult({list.__repr__(self)}, alpha={self.alpha}, "
            f"matched_tags={self.matched_tags}, fallback_mode={self.fallback_mode}, "
            f"time_window={self.time_window})"
        )


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What :meth:`HybridMemory.stats` reports about a store (or one namespace of it).

    ``count`` is read from the Chroma collection (the source of truth), ``indexed`` from
    the derived keyword index: they differ while the index catches up with another
    process's writes (see ``HybridMemory.sync``). ``location`` and ``index_path`` are
    paths and URLs of the machine running the store: an application serving other
    people should not show them.
    """

    #: Memories stored (in this namespace, for a namespace view).
    count: int
    #: Memories in the keyword index.
    indexed: int
    #: Distinct tags in use.
    tags: int
    #: ``embedded`` (a directory), ``server`` (a Chroma server URL), ``client`` (a
    #: Chroma client passed in) or ``in-memory``.
    kind: str
    #: The store's directory or the server's URL; None for a passed client or in memory.
    location: str | None
    #: The Chroma collection holding the memories.
    collection: str
    #: The keyword index's SQLite file; None when it is kept in memory.
    index_path: str | None
    #: The embedding's name, as recorded with the collection.
    embedding: str
    #: The vectors' dimension; None until the first memory is stored.
    dimension: int | None
    #: The namespace path of a view made by ``HybridMemory.namespace`` (``()``: the store).
    namespace: tuple[str, ...]
    #: Seconds between checks for other processes' writes.
    sync_interval: float

    @property
    def in_step(self) -> bool:
        """Whether the keyword index holds as many memories as the collection."""
        return self.indexed == self.count
