"""What the tools answer: the structured output of each tool, as pydantic models whose
JSON schemas the server advertises (``outputSchema``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from hybrid_memory import Memory, SearchResult, StoreStats

__all__ = [
    "DeleteResult",
    "MemoryPage",
    "MemoryRecord",
    "MemoryStats",
    "SearchHit",
    "SearchResponse",
    "SimilarFound",
    "StoreManyResult",
    "StoreResult",
    "TagList",
]


class MemoryRecord(BaseModel):
    """One stored memory."""

    id: str = Field(description="The memory's id.")
    text: str = Field(description="The memory's text.")
    tags: list[str] = Field(description="Normalised tags (lowercase).")
    metadata: dict[str, Any] = Field(description="User metadata.")
    created_at: str | None = Field(description="When it was stored, ISO 8601 UTC.")
    updated_at: str | None = Field(description="When it last changed, ISO 8601 UTC.")

    @classmethod
    def of(cls, memory: Memory) -> MemoryRecord:
        """The record of a library :class:`~hybrid_memory.Memory`."""
        return cls(
            id=memory.id,
            text=memory.text,
            tags=list(memory.tags),
            metadata=dict(memory.metadata),
            created_at=_iso(memory.created_at),
            updated_at=_iso(memory.updated_at),
        )


class SearchHit(MemoryRecord):
    """A memory found by a search, with why it was found."""

    score: float = Field(
        description="Relevance in [0, 1], to threshold: a near-exact match is close to 1, an "
        "unrelated memory low. Never increases down the hits."
    )
    fused_score: float = Field(
        description="The weighted reciprocal rank fusion value that orders the hits (compare "
        "within one result only)."
    )
    ranks: dict[str, int] = Field(
        description="1-based rank in each leg that returned it: vector, keyword, tag."
    )
    scores: dict[str, float] = Field(
        description="Raw score in each leg: cosine similarity, BM25, matched tag count."
    )
    superseded_by: str | None = Field(
        default=None,
        description="The id of a newer memory that replaces this one (stored with "
        "supersedes=this id): this one is ranked lower and may be out of date; else null.",
    )
    similar_ids: list[str] = Field(
        default_factory=list,
        description="Memories that say nearly the same thing as this one, folded into this "
        "hit (it is the best ranked of them, a superseding one before those it "
        "supersedes): get_memory "
        "shows each.",
    )


class SearchResponse(BaseModel):
    """The hits of a search or related query, best first, and how the search went."""

    hits: list[SearchHit] = Field(description="Best first.")
    fallback_mode: bool = Field(
        description="True when the query could not be embedded and only the keyword and tag "
        "legs answered."
    )
    fallback_reason: str | None = Field(description="Why fallback_mode is on, else null.")
    alpha: float = Field(description="Vector share against the keyword leg that was used.")
    matched_tags: list[str] = Field(description="Known tags found in or given with the query.")

    @classmethod
    def of(cls, result: SearchResult, min_score: float | None = None) -> SearchResponse:
        """The result's hits, those below ``min_score`` (relevance) left out."""
        floor = 0.0 if min_score is None else min_score
        return cls(
            hits=[
                SearchHit(
                    **MemoryRecord.of(hit.memory).model_dump(),
                    score=hit.score,
                    fused_score=hit.fused_score,
                    ranks=dict(hit.ranks),
                    scores=dict(hit.scores),
                    superseded_by=hit.superseded_by,
                    similar_ids=list(hit.similar_ids),
                )
                for hit in result
                if hit.score >= floor
            ],
            fallback_mode=result.fallback_mode,
            fallback_reason=result.fallback_reason,
            alpha=result.alpha,
            matched_tags=list(result.matched_tags),
        )


class SimilarFound(BaseModel):
    """A stored memory that says nearly what a memory being stored says."""

    id: str = Field(description="The stored memory's id.")
    similarity: float = Field(description="Cosine similarity of the two, up to 1.")
    text: str = Field(description="The stored memory's text.")


class StoreResult(BaseModel):
    """What store_memory did (or store_memories did with one of its memories)."""

    id: str = Field(
        description="The memory's id (the existing one when duplicate, or when a repeat "
        "was skipped: on_similar='skip')."
    )
    duplicate: bool = Field(
        description="True when this exact text was already stored with the same metadata "
        "(no id given): nothing new was written and id is the existing memory's."
    )
    replaced: bool = Field(description="True when upsert replaced a memory with this id.")
    stored: bool = Field(
        default=True,
        description="True when this call wrote the memory; false for a duplicate or a "
        "skipped repeat.",
    )
    similar: list[SimilarFound] = Field(
        default_factory=list,
        description="Stored memories that say nearly the same thing, most similar first. "
        "Not empty: you are repeating a memory. Prefer update_memory on the first one, or "
        "store with supersedes=its id when this one replaces it (on_similar='supersede' "
        "does that), to storing it again.",
    )


class StoreManyResult(BaseModel):
    """What store_memories did."""

    memories: list[StoreResult] = Field(
        description="One result per memory given, in the same order: its id, duplicate, "
        "replaced, stored and the similar memories stored already."
    )
    written: int = Field(
        description="How many memories were written (new or replaced): those stored."
    )


class DeleteResult(BaseModel):
    """What delete_memory did, or (dry_run) would do."""

    deleted: int = Field(description="How many memories were deleted (0 on a dry run).")
    matched: int = Field(description="How many memories the ids or the filter match.")
    dry_run: bool = Field(description="True when nothing was deleted: a preview.")
    preview: list[MemoryRecord] = Field(
        description="On a dry run, the first matching memories (at most 20), oldest first."
    )


class MemoryPage(BaseModel):
    """One page of a listing, oldest first."""

    memories: list[MemoryRecord] = Field(description="This page's memories, oldest first.")
    total: int = Field(description="How many memories pass the filter, over all pages.")
    offset: int = Field(description="How many were skipped before this page.")
    next_offset: int | None = Field(
        description="The offset of the next page; null when this is the last one."
    )


class TagList(BaseModel):
    """Every tag in use in the store (or namespace)."""

    tags: list[str] = Field(description="Every tag in use, sorted.")


class MemoryStats(BaseModel):
    """The store as this server sees it. No file path or server address: those belong
    to the machine running the server, not to its clients."""

    count: int = Field(description="Memories stored (in the namespace, if one is set).")
    indexed: int = Field(description="Memories in the keyword index.")
    in_step: bool = Field(description="Whether the keyword index holds every memory.")
    tags: list[str] = Field(description="Every tag in use, sorted.")
    embedding_model: str = Field(description="The embedding the collection was built with.")
    kind: str = Field(
        description="embedded (a directory), server (a Chroma server), client or in-memory."
    )
    namespace: str | None = Field(description="The namespace every tool is scoped to, if any.")
    sync_interval: float = Field(description="Seconds between checks for other writers.")

    @classmethod
    def of(cls, stats: StoreStats, tags: list[str], namespace: str | None) -> MemoryStats:
        """The stats a client sees: the library's, without paths or addresses."""
        return cls(
            count=stats.count,
            indexed=stats.indexed,
            in_step=stats.in_step,
            tags=tags,
            embedding_model=stats.embedding,
            kind=stats.kind,
            namespace=namespace,
            sync_interval=stats.sync_interval,
        )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
