"""The MCP tools over one :class:`hybrid_memory.HybridMemory` store.

``create_server(memory)`` returns an ``mcp`` SDK ``MCPServer`` (the SDK's FastMCP API,
renamed in mcp 2) with eight tools, each with a described JSON schema and structured
output, and a ``memory://{id}`` resource::

    from hybrid_memory import HybridMemory
    from hybrid_memory_mcp import create_server

    server = create_server(HybridMemory(path="./memory"))
    server.run()                      # stdio; see hybrid_memory_mcp.cli for HTTP

Every error the library raises on purpose (bad input, unknown id, store failure)
comes back as a tool error (``isError``) carrying the library's message; the library
validates before it writes, so a refused call changes nothing.

With a namespace (``MCPServerSettings.namespace``) every tool sees only the memories
whose metadata ``namespace_key`` holds that value: stores add it, searches, related,
counts, tags and filter deletes are ANDed with it, and ids are kept per namespace
(stored as ``<namespace>:<id>``), so an id of another namespace is simply not found.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from hybrid_memory import (
    HybridMemory,
    HybridMemoryError,
    InvalidInputError,
    Memory,
    MemoryNotFoundError,
    SearchResult,
)
from hybrid_memory_mcp.settings import MCPServerSettings

__all__ = [
    "DeleteResult",
    "MemoryRecord",
    "MemoryStats",
    "SearchHit",
    "SearchResponse",
    "StoreResult",
    "TagList",
    "create_server",
]

SERVER_NAME = "hybrid-memory"
INSTRUCTIONS = (
    "Long-term memory. Save facts worth remembering with store_memory (short texts, with "
    "tags and metadata such as user or topic); recall with search_memory before answering "
    "questions that may depend on earlier conversations. Filters use Chroma's where syntax "
    "over metadata, plus the fields tags, created_at and updated_at."
)
FILTER_HELP = (
    "Metadata filter in Chroma's where syntax, applied before ranking: {'user': 'alice'}, "
    "{'session': {'$gte': 3}}, {'$and': [...]}, {'$or': [...]}; operators $eq $ne $gt $gte "
    "$lt $lte $in $nin $contains $not_contains. Reserved fields: tags ({'tags': {'$contains': "
    "'ui'}}), created_at and updated_at (ISO 8601 or epoch seconds)."
)

# --- structured output ---------------------------------------------------------------


class MemoryRecord(BaseModel):
    """One stored memory."""

    id: str = Field(description="The memory's id.")
    text: str = Field(description="The memory's text.")
    tags: list[str] = Field(description="Normalised tags (lowercase).")
    metadata: dict[str, Any] = Field(description="User metadata.")
    created_at: str | None = Field(description="When it was stored, ISO 8601 UTC.")
    updated_at: str | None = Field(description="When it last changed, ISO 8601 UTC.")


class SearchHit(MemoryRecord):
    """A memory found by a search, with why it was found."""

    score: float = Field(
        description="Relevance in [0, 1] (cosine or keyword coverage); near 1: near-exact."
    )
    fused_score: float = Field(
        description="Fused score (weighted reciprocal rank fusion) that orders the hits."
    )
    ranks: dict[str, int] = Field(
        description="1-based rank in each leg that returned it: vector, keyword, tag."
    )
    scores: dict[str, float] = Field(
        description="Raw score in each leg: cosine similarity, BM25, matched tag count."
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


class StoreResult(BaseModel):
    """What store_memory did."""

    id: str = Field(description="The memory's id (the existing one when duplicate).")
    duplicate: bool = Field(
        description="True when this exact text was already stored with the same metadata "
        "(no id given): nothing new was written and id is the existing memory's."
    )
    replaced: bool = Field(description="True when upsert replaced a memory with this id.")


class DeleteResult(BaseModel):
    deleted: int = Field(description="How many memories were deleted.")


class TagList(BaseModel):
    tags: list[str] = Field(description="Every tag in use, sorted.")


class StoreInfo(BaseModel):
    kind: str = Field(description="embedded (on disk), server (Chroma server) or in-memory.")
    location: str | None = Field(description="Store directory or Chroma server URL.")
    collection: str = Field(description="Chroma collection name.")


class IndexInfo(BaseModel):
    location: str = Field(description="SQLite file of the derived keyword index, or 'memory'.")
    indexed: int = Field(description="Memories in the keyword index.")
    in_step: bool = Field(description="Whether the index holds as many memories as Chroma.")
    sync_interval: float = Field(description="Seconds between checks for other writers.")


class MemoryStats(BaseModel):
    count: int = Field(description="Memories stored (in the namespace, if one is set).")
    tags: list[str] = Field(description="Every tag in use, sorted.")
    embedding_model: str = Field(description="The embedding the collection was built with.")
    store: StoreInfo
    index: IndexInfo
    namespace: str | None = Field(description="The namespace every tool is scoped to, if any.")


# --- tool arguments ----------------------------------------------------------------------

Text = Annotated[str, Field(description="The memory text: a short, self-contained fact.")]
Tags = Annotated[
    list[str] | None,
    Field(description="Tags to file it under (lowercased; e.g. ['alice', 'preferences'])."),
]
Metadata = Annotated[
    dict[str, Any] | None,
    Field(
        description="Flat metadata: string keys, values str, int, float, bool or a non-empty "
        "list of one of those (e.g. {'user': 'alice', 'session': 3})."
    ),
]
MemoryId = Annotated[str, Field(description="The memory's id.")]
Filter = Annotated[dict[str, Any] | None, Field(description=FILTER_HELP)]
K = Annotated[int | None, Field(description="How many hits, 1..max_k (100 by default); default 5.")]


# --- the scope: the whole store, or one namespace of it -------------------------------------


class _Scope:
    """Maps the tools' ids, metadata and filters to the store's, for a namespace (or not)."""

    def __init__(self, namespace: str | None, key: str) -> None:
        self.namespace = namespace
        self.key = key
        self.prefix = f"{namespace}:" if namespace is not None else ""

    def stored_id(self, memory_id: Any) -> Any:
        # Non-strings pass through for the library to reject with its own message.
        return self.prefix + memory_id if self.prefix and isinstance(memory_id, str) else memory_id

    def public_id(self, memory_id: str) -> str:
        return memory_id.removeprefix(self.prefix) if self.prefix else memory_id

    def metadata(self, metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if self.namespace is None:
            return metadata
        given = dict(metadata or {})
        if self.key in given and given[self.key] != self.namespace:
            raise InvalidInputError(
                f"metadata[{self.key!r}]",
                f"this server is scoped to namespace {self.namespace!r}; leave {self.key!r} out "
                "(it is set for you)",
            )
        given[self.key] = self.namespace
        return given

    def filter(self, where: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if self.namespace is None:
            return where
        own = {self.key: self.namespace}
        if where is None or (isinstance(where, Mapping) and not where):
            return own
        return {"$and": [where, own]}

    def owns(self, memory: Memory) -> bool:
        return self.namespace is None or memory.metadata.get(self.key) == self.namespace


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@contextmanager
def _library_errors() -> Iterator[None]:
    """The library's own errors become tool errors carrying its message."""
    try:
        yield
    except HybridMemoryError as exc:
        raise ToolError(str(exc)) from exc


def create_server(
    memory: HybridMemory,
    settings: MCPServerSettings | None = None,
    *,
    name: str = SERVER_NAME,
) -> MCPServer:
    """An MCP server whose tools read and write ``memory``.

    The server does not close ``memory``; the caller owns it.
    """
    settings = settings or MCPServerSettings()
    scope = _Scope(settings.namespace, settings.namespace_key)
    server: MCPServer = MCPServer(
        name,
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level=settings.log_level,
    )

    def record(m: Memory) -> MemoryRecord:
        return MemoryRecord(
            id=scope.public_id(m.id),
            text=m.text,
            tags=list(m.tags),
            metadata=dict(m.metadata),
            created_at=_iso(m.created_at),
            updated_at=_iso(m.updated_at),
        )

    def response(result: SearchResult) -> SearchResponse:
        return SearchResponse(
            hits=[
                SearchHit(
                    **record(hit.memory).model_dump(),
                    score=hit.score,
                    fused_score=hit.fused_score,
                    ranks=dict(hit.ranks),
                    scores=dict(hit.scores),
                )
                for hit in result
            ],
            fallback_mode=result.fallback_mode,
            fallback_reason=result.fallback_reason,
            alpha=result.alpha,
            matched_tags=list(result.matched_tags),
        )

    def owned(memory_id: Any) -> Memory:
        """The memory with this (public) id, if it is in scope; else not found."""
        found = memory.get(scope.stored_id(memory_id))
        if not scope.owns(found):
            raise MemoryNotFoundError(memory_id)
        return found

    def exists(stored_id: str) -> bool:
        try:
            memory.get(stored_id)
        except MemoryNotFoundError:
            return False
        return True

    def scoped_tags() -> list[str]:
        tags = memory.tags()
        if scope.namespace is None:
            return tags
        # The library's tag list spans the store: keep the tags carried in this namespace.
        return [tag for tag in tags if memory.count(scope.filter({"tags": {"$contains": tag}}))]

    @server.tool(
        annotations=ToolAnnotations(title="Store a memory", destructive_hint=False),
    )
    def store_memory(
        text: Text,
        tags: Tags = None,
        metadata: Metadata = None,
        id: Annotated[
            str | None,
            Field(
                description="Your own id for it; default: a new id (and a text already "
                "stored is not stored twice)."
            ),
        ] = None,
        upsert: Annotated[
            bool, Field(description="With an id that exists: replace that memory.")
        ] = False,
    ) -> StoreResult:
        """Store one memory (a fact, preference or event worth recalling later).

        Returns its id. Storing a text that is already stored with the same metadata,
        without an id, returns the existing memory's id with duplicate=true and writes
        nothing.
        """
        with _library_errors():
            meta = scope.metadata(metadata)
            if id is not None:
                stored = scope.stored_id(id)
                replaced = upsert and exists(stored)
                new_id = memory.add(text, id=stored, tags=tags, metadata=meta, upsert=upsert)
                return StoreResult(id=scope.public_id(new_id), duplicate=False, replaced=replaced)
            if scope.namespace is not None:
                # Within a namespace, dedup is by id: the same text always gets the same
                # id here, whatever its metadata.
                digest = hashlib.sha256(f"{scope.namespace}\0{text}".encode()).hexdigest()
                stored = scope.stored_id(digest[:32])
                if exists(stored):
                    owned(scope.public_id(stored))
                    return StoreResult(id=scope.public_id(stored), duplicate=True, replaced=False)
                memory.add(text, id=stored, tags=tags, metadata=meta)
                return StoreResult(id=scope.public_id(stored), duplicate=False, replaced=False)
            started = time.time()
            new_id = memory.add(text, tags=tags, metadata=meta)
            # A new memory is created now; a duplicate's creation time is from before.
            created = memory.get(new_id).created_at
            duplicate = created is not None and created.timestamp() < started
            return StoreResult(id=new_id, duplicate=duplicate, replaced=False)

    @server.tool(annotations=ToolAnnotations(title="Search memory", read_only_hint=True))
    def search_memory(
        query: Annotated[str, Field(description="What to recall, in natural language.")],
        k: K = None,
        filter: Filter = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Tags to favour, besides known tags found in the query."),
        ] = None,
        alpha: Annotated[
            float | None,
            Field(
                description="Vector share against keyword matching, 0..1 (1 = meaning only, "
                "0 = words only); default adapts to the store's size."
            ),
        ] = None,
        max_tokens: Annotated[
            int | None,
            Field(description="Stop adding hits once their texts would exceed this many tokens."),
        ] = None,
    ) -> SearchResponse:
        """Hybrid search (meaning + keywords + tags) over stored memories, best first.

        Each hit carries its relevance (0 to 1), its fused score and its rank and score
        in each leg.
        """
        with _library_errors():
            result = memory.search(
                query,
                k=k,
                filter=scope.filter(filter),
                tags=tags,
                alpha=alpha,
                max_tokens=max_tokens,
            )
            return response(result)

    @server.tool(annotations=ToolAnnotations(title="Related memories", read_only_hint=True))
    def get_related(id: MemoryId, k: K = None, filter: Filter = None) -> SearchResponse:
        """Memories related to the one with this id (similar meaning, shared tags and
        words), best first, the memory itself left out."""
        with _library_errors():
            owned(id)
            return response(memory.related(scope.stored_id(id), k=k, filter=scope.filter(filter)))

    @server.tool(annotations=ToolAnnotations(title="Get a memory", read_only_hint=True))
    def get_memory(id: MemoryId) -> MemoryRecord:
        """The memory with this id."""
        with _library_errors():
            return record(owned(id))

    @server.tool(
        annotations=ToolAnnotations(
            title="Update a memory", destructive_hint=True, idempotent_hint=True
        )
    )
    def update_memory(
        id: MemoryId,
        text: Annotated[str | None, Field(description="New text (re-embedded).")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags (replace the old).")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="New metadata (replaces the old).")
        ] = None,
    ) -> MemoryRecord:
        """Change a memory's text, tags and/or metadata; each given value replaces the
        old one. Returns the memory as it now is."""
        with _library_errors():
            owned(id)
            meta = None if metadata is None else scope.metadata(metadata)
            return record(memory.update(scope.stored_id(id), text=text, tags=tags, metadata=meta))

    @server.tool(annotations=ToolAnnotations(title="Delete memories", destructive_hint=True))
    def delete_memory(
        ids: Annotated[
            list[str] | None,
            Field(description="Ids to delete; all must exist, else nothing is deleted."),
        ] = None,
        filter: Annotated[
            dict[str, Any] | None,
            Field(
                description="Delete every memory matching this filter instead (needs "
                "confirm=true). " + FILTER_HELP
            ),
        ] = None,
        confirm: Annotated[
            bool, Field(description="Must be true for a filter delete: it can remove many.")
        ] = False,
    ) -> DeleteResult:
        """Delete memories by ids, or by a filter with confirm=true."""
        with _library_errors():
            if (ids is None) == (filter is None):
                raise InvalidInputError(
                    "delete_memory", "give exactly one of ids or filter, not both or neither"
                )
            if filter is not None:
                if not confirm:
                    raise InvalidInputError(
                        "confirm",
                        "a filter delete removes every matching memory; call again with "
                        "confirm=true to do it (nothing was deleted)",
                    )
                if not filter:
                    raise InvalidInputError(
                        "filter", "an empty filter would delete everything; pass ids instead"
                    )
                return DeleteResult(deleted=memory.delete(filter=scope.filter(filter)))
            assert ids is not None
            for memory_id in ids:
                owned(memory_id)  # all in scope, or nothing is deleted
            return DeleteResult(deleted=memory.delete([scope.stored_id(i) for i in ids]))

    @server.tool(annotations=ToolAnnotations(title="List tags", read_only_hint=True))
    def list_tags() -> TagList:
        """Every tag in use, sorted."""
        with _library_errors():
            return TagList(tags=scoped_tags())

    @server.tool(annotations=ToolAnnotations(title="Memory statistics", read_only_hint=True))
    def memory_stats() -> MemoryStats:
        """How many memories there are, the tags, the embedding model, where the store
        lives and the state of its keyword index."""
        with _library_errors():
            s = memory.settings
            total = memory.count()
            # A filter every memory passes is answered by the keyword index: its count.
            indexed = memory.count({"created_at": {"$gte": 0}})
            if s.url:
                kind, location = "server", s.url
            elif s.path:
                kind, location = "embedded", s.path
            else:
                kind, location = "in-memory", None
            index_location = s.index_path or (
                f"{s.path}/keyword-{s.collection}.sqlite3" if s.path else "memory"
            )
            return MemoryStats(
                count=total if scope.namespace is None else memory.count(scope.filter(None)),
                tags=scoped_tags(),
                embedding_model=str(getattr(memory.embedder, "name", s.embedding_model)),
                store=StoreInfo(kind=kind, location=location, collection=s.collection),
                index=IndexInfo(
                    location=index_location,
                    indexed=indexed,
                    in_step=indexed == total,
                    sync_interval=s.sync_interval,
                ),
                namespace=scope.namespace,
            )

    @server.resource(
        "memory://{id}",
        name="memory",
        description="One stored memory as JSON (id, text, tags, metadata, times).",
        mime_type="application/json",
    )
    def memory_resource(id: str) -> str:
        try:
            return json.dumps(record(owned(id)).model_dump(), ensure_ascii=False)
        except MemoryNotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except HybridMemoryError as exc:
            raise ResourceError(str(exc)) from exc

    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hybrid-memory-mcp")
    except PackageNotFoundError:
        return "0.1.0"
