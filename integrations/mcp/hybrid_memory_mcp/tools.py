"""The tools: one method each over one store (or one namespace of it).

Each public method of :class:`MemoryTools` is a tool; its signature is the tool's input
schema (the ``Annotated`` descriptions below) and its docstring the tool's description.
Every error the library raises on purpose (bad input, unknown id, store failure) comes
back as a tool error carrying the library's message; the library validates before it
writes, so a refused call changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, Strict

from hybrid_memory import (
    AddResult,
    DuplicateIdError,
    HybridMemory,
    HybridMemoryError,
    InvalidInputError,
)
from hybrid_memory_mcp.models import (
    DeleteResult,
    MemoryPage,
    MemoryRecord,
    MemoryStats,
    SearchResponse,
    SimilarFound,
    StoreManyResult,
    StoreResult,
    TagList,
)
from hybrid_memory_mcp.times import time_bound

__all__ = ["FILTER_HELP", "MemoryTools", "library_errors"]

FILTER_HELP = (
    "Metadata filter in Chroma's where syntax, applied before ranking: {'user': 'alice'}, "
    "{'session': {'$gte': 3}}, {'$and': [...]}, {'$or': [...]}; operators $eq $ne $gt $gte "
    "$lt $lte $in $nin $contains $not_contains. Reserved fields: tags ({'tags': {'$contains': "
    "'ui'}}), created_at and updated_at (ISO 8601 or epoch seconds)."
)
TIME_HELP = (
    "ISO 8601 date or time (2026-05-01, 2026-05-01T09:30:00Z), epoch seconds, '3 days ago', "
    "'2w', '12h', today, yesterday, last week, last month or last year"
)
PREVIEW = 20  # memories a dry-run delete shows
PAGE_LIMIT = 100  # the largest page list_memories returns
# The most memories one store_memories call takes. A call is embedded and written before
# it answers: 1,000 short texts take seconds on a CPU, well within a client's request
# timeout, and fit the HTTP transport's 1 MiB body at about 1 KB a memory; more go in
# several calls.
BATCH_LIMIT = 1000

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
OwnId = Annotated[
    str | None,
    Field(
        description="Your own id for it; default: a new id (and a text already stored is "
        "not stored twice)."
    ),
]
Supersedes = Annotated[
    str | None,
    Field(
        description="The id of a stored memory this one replaces (a changed address, "
        "preference or count): searches then rank the older one lower and mark it "
        "superseded_by; it is kept, never deleted. An unknown id stores nothing."
    ),
]
OnSimilarChoice = Annotated[
    Literal["keep", "skip", "supersede"] | None,
    Field(
        description="When stored memories say nearly the same thing (a repeat): 'keep' "
        "stores it anyway, 'skip' stores nothing and returns the stored one's id, "
        "'supersede' stores it as replacing the most similar one. Default: the server's "
        "setting (HYBRID_MEMORY_ON_SIMILAR, 'keep'). Either way the result lists them "
        "in similar."
    ),
]
Filter = Annotated[dict[str, Any] | None, Field(description=FILTER_HELP)]
# The maximum is the store's max_k, added to the schema when the server is built.
K = Annotated[int | None, Field(ge=1, description="How many hits; default 5.")]
Alpha = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description="Vector share against keyword matching, 0..1 (1 = meaning only, 0 = words "
        "only); default adapts to the store's size.",
    ),
]
MinScore = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description="Leave out hits whose relevance score is below this, 0..1 (0.3 keeps "
        "related memories, 0.6 close matches); default: keep all k.",
    ),
]
MaxTokens = Annotated[
    int | None,
    Field(ge=1, description="Stop adding hits once their texts would exceed this many tokens."),
]
EpochSeconds = Annotated[float, Field(ge=0)]
After = Annotated[
    str | EpochSeconds | None,
    Field(description=f"Only memories stored at or after this time: {TIME_HELP}."),
]
Before = Annotated[
    str | EpochSeconds | None,
    Field(description=f"Only memories stored before this time: {TIME_HELP}."),
]
WithTags = Annotated[
    list[str] | None,
    Field(description="Only memories carrying these tags (see tag_mode)."),
]
# Strict: pydantic would take "yes" or "1" for true, and confirm deletes.
Flag = Annotated[bool, Strict()]
TagMode = Annotated[
    Literal["any", "all"],
    Field(description="With with_tags: 'any' (at least one of them, default) or 'all'."),
]


class MemoryItem(BaseModel):
    """One memory of a store_memories call: store_memory's fields, and no others."""

    model_config = ConfigDict(extra="forbid")

    text: Text
    tags: Tags = None
    metadata: Metadata = None
    id: OwnId = None
    supersedes: Supersedes = None


@contextmanager
def library_errors() -> Iterator[None]:
    """The library's own errors become tool errors carrying its message."""
    try:
        yield
    except HybridMemoryError as exc:
        raise ToolError(str(exc)) from exc


def scoped_filter(
    where: Mapping[str, Any] | None,
    *,
    after: Any = None,
    before: Any = None,
    with_tags: list[str] | None = None,
    tag_mode: str = "any",
) -> Mapping[str, Any] | None:
    """``where`` ANDed with the time bounds and the tag condition (None: no filter)."""
    parts: list[Mapping[str, Any]] = [where] if where else []
    if after is not None:
        parts.append({"created_at": {"$gte": time_bound(after, "after")}})
    if before is not None:
        parts.append({"created_at": {"$lt": time_bound(before, "before")}})
    if with_tags is not None:
        if not with_tags:
            raise InvalidInputError("with_tags", "give at least one tag, or leave it out")
        each = [{"tags": {"$contains": tag}} for tag in with_tags]
        parts.append(each[0] if len(each) == 1 else {"$or" if tag_mode == "any" else "$and": each})
    if not parts:
        return where  # None, or {} for the library to judge
    return parts[0] if len(parts) == 1 else {"$and": parts}


class MemoryTools:
    """The tools over ``memory``, which is the whole store or one namespace of it."""

    def __init__(self, memory: HybridMemory, namespace: str | None = None) -> None:
        self.memory = memory
        self.namespace = namespace

    # --- writing -------------------------------------------------------------------

    def store_memory(
        self,
        text: Text,
        tags: Tags = None,
        metadata: Metadata = None,
        id: OwnId = None,
        upsert: Annotated[
            Flag, Field(description="With an id that exists: replace that memory.")
        ] = False,
        supersedes: Supersedes = None,
        on_similar: OnSimilarChoice = None,
    ) -> StoreResult:
        """Store one memory (a fact, preference or event worth recalling later).

        Returns its id. Storing a text that is already stored with the same metadata,
        without an id, returns the existing memory's id with duplicate=true and writes
        nothing. When it replaces an older memory (the user moved, changed their mind),
        pass that memory's id as supersedes: the older one then ranks lower and is marked.
        When stored memories say nearly the same thing, similar lists them (id, similarity,
        text): update one of them instead of repeating it.
        """
        with library_errors():
            result = self.memory.add(
                text,
                id=id,
                tags=tags,
                metadata=metadata,
                upsert=upsert,
                supersedes=supersedes,
                on_similar=on_similar,
            )
            return _store_results(self.memory, [result])[0]

    def store_memories(
        self,
        memories: Annotated[
            list[MemoryItem],
            Field(
                min_length=1,
                max_length=BATCH_LIMIT,
                description="The memories, 1 to 1,000 (each: text, and optionally tags, "
                "metadata, id, supersedes, as for store_memory). More go in several calls: "
                "each call is embedded before it answers, and 1,000 short texts already take "
                "seconds.",
            ),
        ],
        upsert: Annotated[
            Flag, Field(description="Memories whose id exists replace those memories.")
        ] = False,
        on_similar: OnSimilarChoice = None,
    ) -> StoreManyResult:
        """Store many memories in one call (one write: faster than store_memory each).

        Everything is checked first: one bad memory stores none and is named by position
        (memories[3].tags). Returns, in order, each memory's id, duplicate (its text was
        already stored with the same metadata, or given earlier in this call, without an
        id: the existing id is returned and nothing new written), replaced, stored and
        similar (stored memories, or earlier ones of this call, saying nearly the same).
        """
        items = [item.model_dump(exclude_none=True) for item in memories]
        with library_errors(), batch_positions(items):
            _refuse_repeated_ids(items)
            report = self.memory.add_many(items, upsert=upsert, on_similar=on_similar)
            results = _store_results(self.memory, report.results)
            return StoreManyResult(memories=results, written=report.written)

    def update_memory(
        self,
        id: MemoryId,
        text: Annotated[str | None, Field(description="New text (re-embedded).")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags (replace the old).")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="New metadata (replaces the old).")
        ] = None,
        supersedes: Supersedes = None,
    ) -> MemoryRecord:
        """Change a memory's text, tags and/or metadata; each given value replaces the
        old one. Returns the memory as it now is."""
        with library_errors():
            changed = self.memory.update(
                id, text=text, tags=tags, metadata=metadata, supersedes=supersedes
            )
            return MemoryRecord.of(changed)

    def delete_memory(
        self,
        ids: Annotated[
            list[str] | None,
            Field(description="Ids to delete; all must exist, else nothing is deleted."),
        ] = None,
        filter: Annotated[
            dict[str, Any] | None,
            Field(
                description="Delete every memory matching this filter instead (needs "
                "confirm=true, or dry_run=true to preview). " + FILTER_HELP
            ),
        ] = None,
        confirm: Annotated[
            Flag, Field(description="Must be true for a filter delete: it can remove many.")
        ] = False,
        dry_run: Annotated[
            Flag,
            Field(
                description="Delete nothing: say how many memories would go and show the "
                "first of them."
            ),
        ] = False,
    ) -> DeleteResult:
        """Delete memories by ids, or by a filter with confirm=true. dry_run=true
        previews either without deleting."""
        memory = self.memory
        with library_errors():
            if (ids is None) == (filter is None):
                raise InvalidInputError(
                    "delete_memory", "give exactly one of ids or filter, not both or neither"
                )
            if ids is not None:
                if dry_run:
                    found = memory.existing(ids)
                    return _preview(len(found), memory.get_many(sorted(found)[:PREVIEW]))
                matched = memory.delete(ids)
                return DeleteResult(deleted=matched, matched=matched, dry_run=False, preview=[])
            assert filter is not None
            if not filter:
                raise InvalidInputError(
                    "filter", "an empty filter would delete everything; pass ids instead"
                )
            if dry_run:
                return _preview(memory.count(filter), memory.list_memories(filter, limit=PREVIEW))
            if not confirm:
                raise InvalidInputError(
                    "confirm",
                    "a filter delete removes every matching memory; call again with "
                    "confirm=true to do it, or dry_run=true to see what would go (nothing "
                    "was deleted)",
                )
            deleted = memory.delete(filter=filter)
            return DeleteResult(deleted=deleted, matched=deleted, dry_run=False, preview=[])

    # --- reading -------------------------------------------------------------------

    def search_memory(
        self,
        query: Annotated[str, Field(description="What to recall, in natural language.")],
        k: K = None,
        filter: Filter = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Tags to favour, besides known tags found in the query."),
        ] = None,
        with_tags: WithTags = None,
        tag_mode: TagMode = "any",
        after: After = None,
        before: Before = None,
        alpha: Alpha = None,
        max_tokens: MaxTokens = None,
        min_score: MinScore = None,
    ) -> SearchResponse:
        """Hybrid search (meaning + keywords + tags) over stored memories, best first.

        Each hit carries its relevance score in [0, 1] (min_score cuts below it), its fused
        score and its rank and score in each leg. filter, with_tags, after and before
        narrow the memories searched before ranking.
        """
        with library_errors():
            where = scoped_filter(
                filter, after=after, before=before, with_tags=with_tags, tag_mode=tag_mode
            )
            result = self.memory.search(
                query, k=k, filter=where, tags=tags, alpha=alpha, max_tokens=max_tokens
            )
            return SearchResponse.of(result, min_score)

    def get_related(
        self, id: MemoryId, k: K = None, filter: Filter = None, min_score: MinScore = None
    ) -> SearchResponse:
        """Memories related to the one with this id (similar meaning, shared tags and
        words), best first, the memory itself left out."""
        with library_errors():
            return SearchResponse.of(self.memory.related(id, k=k, filter=filter), min_score)

    def get_memory(self, id: MemoryId) -> MemoryRecord:
        """The memory with this id."""
        with library_errors():
            return MemoryRecord.of(self.memory.get(id))

    def list_memories(
        self,
        filter: Filter = None,
        with_tags: WithTags = None,
        tag_mode: TagMode = "any",
        after: After = None,
        before: Before = None,
        limit: Annotated[
            int, Field(ge=1, le=PAGE_LIMIT, description="Memories per page, 1..100.")
        ] = 20,
        offset: Annotated[
            int, Field(ge=0, description="How many to skip: the next_offset of the last page.")
        ] = 0,
        newest_first: Annotated[
            Flag, Field(description="List the newest memories first (default: oldest first).")
        ] = False,
    ) -> MemoryPage:
        """Browse stored memories page by page, with no query (oldest first unless
        newest_first=true). Continue with offset=next_offset until it is null."""
        memory = self.memory
        with library_errors():
            where = scoped_filter(
                filter, after=after, before=before, with_tags=with_tags, tag_mode=tag_mode
            )
            total = memory.count(where)
            if newest_first:
                # The listing is oldest first: read the page from the other end.
                start = max(0, total - offset - limit)
                size = max(0, min(limit, total - offset))
                page = list(reversed(memory.list_memories(where, limit=size, offset=start)))
            else:
                page = memory.list_memories(where, limit=limit, offset=offset)
            after_page = offset + len(page)
            return MemoryPage(
                memories=[MemoryRecord.of(m) for m in page],
                total=total,
                offset=offset,
                next_offset=after_page if page and after_page < total else None,
            )

    def list_tags(self) -> TagList:
        """Every tag in use, sorted."""
        with library_errors():
            return TagList(tags=self.memory.tags())

    def memory_stats(self) -> MemoryStats:
        """How many memories there are, the tags, the embedding model, the kind of store
        and the state of its keyword index."""
        with library_errors():
            return MemoryStats.of(self.memory.stats(), self.memory.tags(), self.namespace)


@contextmanager
def batch_positions(items: list[dict[str, Any]]) -> Iterator[None]:
    """The library names a bad memory of ``add_many`` ``items[3].tags``: here it is
    ``memories[3].tags``, and an id that exists is named by its position too."""
    try:
        yield
    except DuplicateIdError as exc:
        position = next(i for i, item in enumerate(items) if item.get("id") == exc.memory_id)
        raise InvalidInputError(
            f"memories[{position}].id",
            f"a memory with id {exc.memory_id!r} already exists; pass upsert=true to replace "
            "it (nothing was stored)",
        ) from exc
    except InvalidInputError as exc:
        if not exc.field.startswith("items["):
            raise
        field = "memories" + exc.field.removeprefix("items")
        reason = str(exc).removeprefix(f"{exc.field}: ")
        raise InvalidInputError(field, f"{reason} (nothing was stored)") from exc


def _refuse_repeated_ids(items: list[dict[str, Any]]) -> None:
    """One id twice in one call is refused, with upsert too (where the last would
    silently win): it names both positions."""
    seen: dict[str, int] = {}
    for position, item in enumerate(items):
        memory_id = item.get("id")
        if memory_id is None:
            continue
        if memory_id in seen:
            raise InvalidInputError(
                f"memories[{position}].id",
                f"id {memory_id!r} is also memories[{seen[memory_id]}].id; give each id "
                "once per call (nothing was stored)",
            )
        seen[memory_id] = position


def _store_results(memory: HybridMemory, results: Sequence[AddResult]) -> list[StoreResult]:
    """The library's own word on what each add did (decided under its write lock), with
    the texts of the similar memories it found (read in one call; one deleted since is
    left out)."""
    wanted = list(dict.fromkeys(s.id for r in results for s in r.similar))
    present = sorted(memory.existing(wanted)) if wanted else []
    texts = {m.id: m.text for m in memory.get_many(present)} if present else {}
    return [
        StoreResult(
            id=result.id,
            duplicate=result.outcome == "duplicate",
            replaced=result.outcome == "replaced",
            stored=result.stored,
            similar=[
                SimilarFound(id=s.id, similarity=round(s.similarity, 4), text=texts[s.id])
                for s in result.similar
                if s.id in texts
            ],
        )
        for result in results
    ]


def _preview(matched: int, memories: list[Any]) -> DeleteResult:
    return DeleteResult(
        deleted=0,
        matched=matched,
        dry_run=True,
        preview=[MemoryRecord.of(m) for m in memories],
    )
