"""One memory as the Chroma collection stores it, as the keyword index keeps it, and as
a caller gets it back; the conversions between the three.

The collection is the source of truth (docs/architecture.md). It keeps the memory's
text as the document, and the fields hybrid-memory owns in the metadata under
reserved keys (``hm:``): the tags as one JSON string (a Chroma metadata array costs a
row in four of Chroma's indexes per tag on every write), and the two times as
Unix seconds. Everything else in the metadata is the caller's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hybrid_memory._model.results import Memory
from hybrid_memory._model.times import stored_datetime

# Storage keys in Chroma metadata for the fields hybrid-memory owns.
TAGS_KEY = "hm:tags"
CREATED_KEY = "hm:created_at"
UPDATED_KEY = "hm:updated_at"
RESERVED_PREFIX = "hm:"

#: The metadata key holding the id of the memory a memory supersedes (a caller's key,
#: not reserved: see hybrid_memory._search.supersession).
SUPERSEDES_KEY = "supersedes"

_TAGS_JSON = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps builds one per call


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A validated memory the caller gave, not yet written: no id when the store is to
    assign one, no time when it is to be stamped now."""

    id: str | None
    text: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    created_at: float | None
    content_hash: str


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One stored memory, as the keyword index keeps it."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0


_METADATA_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def content_hash(text: str, metadata: Mapping[str, Any]) -> str:
    """The key of exact-duplicate detection, kept in the index only: the text and the
    caller's metadata. Two memories are duplicates only with the same metadata too, so
    the same text stored for two users (``{"user": ...}``) or tenants is two memories,
    and an add never hands back another scope's memory. Without metadata, the text's
    hash alone."""
    key = text if not metadata else f"{text}\x00{_METADATA_JSON(metadata)}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def chroma_metadata(row: IndexRow, replacing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record's metadata as the collection holds it. ``replacing``: the metadata
    stored for this id so far, whose keys the write must remove (Chroma's upsert keeps
    the keys it is not given, and removes those given as None)."""
    meta: dict[str, Any] = dict(row.metadata)
    if row.tags:
        meta[TAGS_KEY] = _TAGS_JSON(row.tags)
    meta[CREATED_KEY] = row.created_at
    meta[UPDATED_KEY] = row.updated_at
    for key in replacing or ():
        meta.setdefault(key, None)
    return meta


def row_from_chroma(
    memory_id: str, document: str | None, metadata: Mapping[str, Any] | None
) -> IndexRow:
    """A collection record (id, document, metadata) as an index row."""
    meta = dict(metadata or {})
    text = document or ""
    tags = stored_tags(meta.pop(TAGS_KEY, None))
    created = float(meta.pop(CREATED_KEY, 0.0) or 0.0)
    updated = float(meta.pop(UPDATED_KEY, created) or created)
    user = {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)}
    return IndexRow(memory_id, text, tags, user, content_hash(text, user), created, updated)


def rows_from_chroma(got: Mapping[str, Any]) -> list[IndexRow]:
    """The records of a Chroma ``get`` that included documents and metadatas."""
    return [
        row_from_chroma(*record)
        for record in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    ]


def stored_tags(value: Any) -> tuple[str, ...]:
    """A memory's tags as the collection holds them: a JSON array in one string, or a
    Chroma metadata array (as earlier versions wrote them; read as they are)."""
    if not value:
        return ()
    if isinstance(value, str):
        try:
            tags = json.loads(value)
        except ValueError:
            return (value,)  # not written by hybrid-memory: kept as one tag, not lost
        return tuple(str(t) for t in tags) if isinstance(tags, list) else (value,)
    return tuple(str(t) for t in value)


def to_memory(row: IndexRow) -> Memory:
    """The caller's view of a stored memory."""
    return Memory(
        id=row.id,
        text=row.text,
        tags=row.tags,
        metadata=row.metadata,
        created_at=stored_datetime(row.created_at),
        updated_at=stored_datetime(row.updated_at),
    )
