"""Checks of what callers pass, run before anything is written: each failure is an
:class:`InvalidInputError` naming the field and what it accepts."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hybrid_memory._model.encodable import encodable
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.filters import RESERVED_FIELDS
from hybrid_memory._model.records import RESERVED_PREFIX, SUPERSEDES_KEY, NewMemory, content_hash
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._model.tags import normalise_tags
from hybrid_memory._model.times import to_timestamp

_ITEM_KEYS = ("text", "id", "tags", "metadata", "created_at", "supersedes")
_MAX_ID_LENGTH = 512


def valid_text(text: Any, max_length: int, field: str = "text") -> str:
    if not isinstance(text, str):
        raise InvalidInputError(field, f"expected a string, got {type(text).__name__}")
    encodable(text, field)
    if not text.strip():
        raise InvalidInputError(field, "must not be empty or blank")
    if len(text) > max_length:
        raise InvalidInputError(
            field,
            f"at most {max_length} characters, got {len(text)} "
            "(raise HYBRID_MEMORY_MAX_TEXT_LENGTH)",
        )
    return text


def valid_id(value: Any, field: str = "id") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, f"expected a non-empty string, got {value!r}")
    if len(value) > _MAX_ID_LENGTH:
        raise InvalidInputError(field, f"at most {_MAX_ID_LENGTH} characters, got {len(value)}")
    return encodable(value, field)


def valid_ids(ids: Any, field: str = "ids") -> list[str]:
    """One id or a list (tuple, set…) of ids; bytes and other scalars are refused rather
    than iterated."""
    if isinstance(ids, str):
        return [valid_id(ids, field)]
    if isinstance(ids, (bytes, bytearray, Mapping)) or not isinstance(ids, Iterable):
        raise InvalidInputError(
            field, f"expected an id (str) or a list of ids, got {type(ids).__name__}"
        )
    return [valid_id(i, f"{field}[{n}]") for n, i in enumerate(ids)]


def valid_tags(tags: Any, settings: HybridMemorySettings, field: str = "tags") -> tuple[str, ...]:
    return normalise_tags(
        tags, max_tags=settings.max_tags, max_length=settings.max_tag_length, field=field
    )


def valid_metadata(metadata: Any, field: str = "metadata") -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(field, f"expected a dict, got {type(metadata).__name__}")
    allowed = (
        "str, int (64-bit), finite float, bool, or a non-empty list whose items are all "
        "str, all int, all float or all bool (Chroma's rule)"
    )
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(field, f"keys must be non-empty strings, got {key!r}")
        encodable(key, f"{field} key")
        if key in RESERVED_FIELDS or key.startswith((RESERVED_PREFIX, "chroma:", "#", "$")):
            raise InvalidInputError(
                f"{field}[{key!r}]",
                f"reserved name; {', '.join(sorted(RESERVED_FIELDS))} are memory fields and "
                f"keys may not start with {RESERVED_PREFIX!r}, 'chroma:', '#' or '$'",
            )
        if _metadata_scalar(value, field, key):
            out[key] = value
        elif (
            isinstance(value, (list, tuple))
            and value
            and all(_metadata_scalar(v, field, key) for v in value)
            and len({_metadata_kind(v) for v in value}) == 1
        ):
            out[key] = list(value)
        else:
            raise InvalidInputError(f"{field}[{key!r}]", f"expected {allowed}, got {value!r}")
    return out


def _metadata_kind(value: Any) -> type:
    return next(t for t in (bool, int, float, str) if isinstance(value, t))


def _metadata_scalar(value: Any, field: str, key: str) -> bool:
    """Whether ``value`` (of ``field[key]``) is a storable metadata scalar;
    InvalidInputError for a scalar no store can hold (an int beyond SQLite's 64 bits, a
    lone surrogate). The error's field is only spelled out when there is an error: this
    runs for every value of every memory written."""
    if isinstance(value, str):
        if not value.isascii():
            encodable(value, f"{field}[{key!r}]")
        return True
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise InvalidInputError(
                f"{field}[{key!r}]",
                f"integers must fit in 64 bits (SQLite's and Chroma's limit), got {value}",
            )
        return True
    return isinstance(value, float) and math.isfinite(value)


def new_memory(item: Any, prefix: str, settings: HybridMemorySettings) -> NewMemory:
    """Validate one memory given to ``add`` / ``add_many``; error fields start with
    ``prefix`` (``items[3].``)."""
    where = prefix.rstrip(".") or "item"
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, Mapping):
        raise InvalidInputError(where, f"expected a text or a dict, got {type(item).__name__}")
    unknown = set(item) - set(_ITEM_KEYS)
    if unknown:
        raise InvalidInputError(
            where, f"unknown keys {sorted(unknown)}; allowed: {', '.join(_ITEM_KEYS)}"
        )
    text = valid_text(item.get("text"), settings.max_text_length, f"{prefix}text")
    memory_id = item.get("id")
    if memory_id is not None:
        memory_id = valid_id(memory_id, f"{prefix}id")
    tags = valid_tags(item.get("tags"), settings, f"{prefix}tags")
    metadata = valid_metadata(item.get("metadata"), f"{prefix}metadata")
    with_link(metadata, item.get("supersedes"), memory_id, prefix)
    created = item.get("created_at")
    created_at = None if created is None else to_timestamp(created, field=f"{prefix}created_at")
    return NewMemory(memory_id, text, tags, metadata, created_at, content_hash(text, metadata))


def with_link(
    metadata: dict[str, Any], supersedes: Any, memory_id: str | None, prefix: str
) -> str | None:
    """Put ``supersedes`` (an id, or None) into ``metadata`` as the supersession link
    (:mod:`hybrid_memory._search.supersession`) and return the link the metadata now holds:
    the argument, or a ``supersedes`` key the caller wrote there, checked alike. Whether
    that memory exists is checked by the store, before anything is written."""
    field = f"{prefix}supersedes"
    if supersedes is not None:
        target = valid_id(supersedes, field)
        given = metadata.get(SUPERSEDES_KEY)
        if given is not None and given != target:
            raise InvalidInputError(
                field, f"{target!r} differs from metadata['supersedes'] {given!r}; give one"
            )
        metadata[SUPERSEDES_KEY] = target
    elif SUPERSEDES_KEY in metadata:
        field = f"{prefix}metadata['supersedes']"
        metadata[SUPERSEDES_KEY] = valid_id(metadata[SUPERSEDES_KEY], field)
    else:
        return None
    if memory_id is not None and metadata[SUPERSEDES_KEY] == memory_id:
        raise InvalidInputError(field, f"a memory cannot supersede itself ({memory_id!r})")
    link: str = metadata[SUPERSEDES_KEY]
    return link


_CHANGE_KEYS = ("id", "text", "tags", "metadata", "supersedes")


@dataclass(frozen=True, slots=True)
class Change:
    """What ``update`` / ``update_many`` changes in one memory (None: kept as stored)."""

    id: str
    text: str | None
    tags: tuple[str, ...] | None
    metadata: dict[str, Any] | None
    supersedes: str | None = None  # set into the metadata, stored or given


def valid_change(item: Any, prefix: str, settings: HybridMemorySettings) -> Change:
    """Validate one change given to ``update`` / ``update_many`` (a dict with ``id`` and
    at least one of ``text``, ``tags``, ``metadata``); error fields start with ``prefix``
    (``updates[3].``)."""
    where = prefix.rstrip(".") or "update"
    if not isinstance(item, Mapping):
        raise InvalidInputError(where, f"expected a dict, got {type(item).__name__}")
    unknown = set(item) - set(_CHANGE_KEYS)
    if unknown:
        raise InvalidInputError(
            where, f"unknown keys {sorted(unknown)}; allowed: {', '.join(_CHANGE_KEYS)}"
        )
    memory_id = valid_id(item.get("id"), f"{prefix}id")
    text, tags, metadata = item.get("text"), item.get("tags"), item.get("metadata")
    supersedes = item.get("supersedes")
    if text is None and tags is None and metadata is None and supersedes is None:
        raise InvalidInputError(where, "give at least one of text, tags, metadata, supersedes")
    new_metadata = None if metadata is None else valid_metadata(metadata, f"{prefix}metadata")
    held = new_metadata if new_metadata is not None else {}
    link = with_link(held, supersedes, memory_id, prefix)
    return Change(
        memory_id,
        None if text is None else valid_text(text, settings.max_text_length, f"{prefix}text"),
        None if tags is None else valid_tags(tags, settings, f"{prefix}tags"),
        new_metadata,
        link,
    )


def valid_changes(items: Any, settings: HybridMemorySettings) -> list[Change]:
    """``update_many``'s changes, each id once; error fields start with ``updates[3].``."""
    if isinstance(items, (str, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError("updates", "expected a list of dicts, each with an id")
    changes = [valid_change(item, f"updates[{i}].", settings) for i, item in enumerate(items)]
    first: dict[str, int] = {}
    for position, change in enumerate(changes):
        if change.id in first:
            raise InvalidInputError(
                f"updates[{position}].id",
                f"id {change.id!r} is also updates[{first[change.id]}].id; give each id once",
            )
        first[change.id] = position
    return changes


class PendingMemories:
    """Memories to write, every one validated before anything is written: each one's id
    and content hash are kept, and so are the first ``KEPT_VALIDATED`` memories
    themselves; a memory past those is validated again when its batch is written. A
    call of a million memories so holds their ids and hashes and a bounded number of
    validated copies of the caller's texts, tags and metadata, and a call of a few
    thousand validates each memory once."""

    KEPT_VALIDATED = 16_384

    def __init__(self, count: int, make: Callable[[int], NewMemory]) -> None:
        self._make = make
        self.ids: list[str | None] = []
        self.hashes: list[str] = []
        self.links: dict[int, str] = {}  # position: the id its memory supersedes
        self._kept: list[NewMemory] = []
        for position in range(count):  # all validated before anything is written
            memory = make(position)
            self.ids.append(memory.id)
            self.hashes.append(memory.content_hash)
            link = memory.metadata.get(SUPERSEDES_KEY)
            if link is not None:
                self.links[position] = link
            if position < self.KEPT_VALIDATED:
                self._kept.append(memory)

    @classmethod
    def of_items(cls, items: Sequence[Any], settings: HybridMemorySettings) -> PendingMemories:
        """``add_many``'s items; error fields start with ``items[3].``."""
        return cls(len(items), lambda i: new_memory(items[i], f"items[{i}].", settings))

    @classmethod
    def of(cls, memories: Sequence[NewMemory]) -> PendingMemories:
        """Memories validated already."""
        return cls(len(memories), memories.__getitem__)

    def __len__(self) -> int:
        return len(self.ids)

    def memory(self, position: int) -> NewMemory:
        if 0 <= position < len(self._kept):
            return self._kept[position]
        return self._make(position)


def valid_k(k: Any, max_k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise InvalidInputError("k", f"expected an integer in 1..{max_k}, got {k!r}")
    return k


def valid_alpha(alpha: Any) -> float | None:
    if alpha is not None and (
        isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1
    ):
        raise InvalidInputError("alpha", f"expected a number in [0, 1], got {alpha!r}")
    return alpha


def valid_mmr(mmr: Any) -> float:
    if isinstance(mmr, bool) or not isinstance(mmr, (int, float)) or not 0 <= mmr <= 1:
        raise InvalidInputError("mmr", f"expected a number in [0, 1] (0: no MMR), got {mmr!r}")
    return float(mmr)


def valid_max_tokens(max_tokens: Any) -> int | None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise InvalidInputError("max_tokens", f"expected a positive integer, got {max_tokens!r}")
    return max_tokens


def valid_page(limit: Any, offset: Any) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInputError("limit", f"expected None or an integer >= 0, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError("offset", f"expected an integer >= 0, got {offset!r}")
