"""How chat messages become memories: one per message of a stored role that has text
(split when longer than the store takes), with the block's metadata and tags, and an id
derived from who said what where, so the same message stored again is the same memory."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from hybrid_memory import MissingDependencyError

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
except ImportError as exc:  # pragma: no cover - the distribution depends on it
    raise MissingDependencyError("llama-index-core", "llama_index.memory.hybrid_memory") from exc

#: ``metadata["source"]`` of the memories the block stores.
SOURCE = "llama_index"


def records_of(
    messages: Sequence[ChatMessage],
    *,
    roles: Sequence[str],
    metadata: dict[str, Any],
    tags: Sequence[str],
    user_id: str | None,
    session_id: str | None,
    max_length: int,
    max_tag: int,
) -> list[dict[str, Any]]:
    """The ``add_many`` items of ``messages`` (a message's own
    ``additional_kwargs["session_id"]`` before ``session_id``)."""
    records: dict[str, dict[str, Any]] = {}
    for message in messages:
        role = role_of(message)
        text = message.content or ""
        if role not in roles or not text.strip():
            continue
        extra = message.additional_kwargs
        session = extra.get("session_id") or session_id
        stored_metadata = {**metadata, "role": role, "source": SOURCE}
        stored_tags = [*tags, f"role:{role}"]
        if session:
            stored_metadata["session_id"] = str(session)
            stored_tags.append(f"session:{session}")
        if user_id:
            stored_metadata["user_id"] = user_id
            stored_tags.append(f"user:{user_id}")
        # A tag too long for the store (a long session id) is left out; the
        # metadata, which filters use, always has the value.
        stored_tags = [t for t in stored_tags if len(t) <= max_tag]
        created = extra.get("timestamp", extra.get("created_at"))
        key = message_key(user_id, session, role, text)
        parts = [text[i : i + max_length] for i in range(0, len(text), max_length)]
        for number, part in enumerate(parts):
            if not part.strip():
                continue
            memory_id = key if len(parts) == 1 else f"{key}-{number}"
            records[memory_id] = {
                "id": memory_id,
                "text": part,
                "tags": stored_tags,
                "metadata": stored_metadata,
                "created_at": created,
            }
            if extra.get("supersedes") is not None:
                records[memory_id]["supersedes"] = extra["supersedes"]
    return list(records.values())


def role_of(message: ChatMessage) -> str:
    role = message.role
    return role.value if isinstance(role, MessageRole) else str(role)


def message_key(user: str | None, session: Any, role: str, text: str) -> str:
    """A stable memory id for one message: the same words from the same speaker in the
    same session (and user) are one memory, however often they are flushed."""
    raw = "\x1f".join([user or "", "" if session is None else str(session), role, text])
    return "li-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]
