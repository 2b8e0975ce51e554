"""What the block checks in what it is given: the roles it stores, the metadata keys it
manages, and its errors as the library's."""

from __future__ import annotations

from typing import Any

from hybrid_memory import InvalidInputError, MissingDependencyError

try:
    from llama_index.core.base.llms.types import MessageRole
    from llama_index.core.bridge.pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - the distribution depends on it
    raise MissingDependencyError("llama-index-core", "llama_index.memory.hybrid_memory") from exc

#: The roles a LlamaIndex chat message can have (``MessageRole`` values).
ROLES = tuple(role.value for role in MessageRole)
#: Metadata keys the block writes on every memory it stores.
MANAGED_KEYS = ("role", "session_id", "source", "user_id")


def known_roles(roles: list[str]) -> list[str]:
    """``roles`` without repeats, each a chat message role."""
    if not roles:
        raise ValueError(f"give at least one role; allowed: {', '.join(ROLES)}")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"unknown roles {unknown}; allowed: {', '.join(ROLES)}")
    return list(dict.fromkeys(roles))


def unmanaged_keys(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata``, checked to hold none of the keys the block writes itself."""
    taken = sorted(set(metadata) & set(MANAGED_KEYS))
    if taken:
        raise ValueError(
            f"{taken} are written by the block itself; not allowed: {', '.join(MANAGED_KEYS)}"
        )
    return metadata


def invalid_input(error: ValidationError) -> InvalidInputError:
    """The first pydantic error as the library's InvalidInputError (field, message)."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "HybridMemoryBlock"
    message = str(first["msg"]).removeprefix("Value error, ")
    return InvalidInputError(field, f"{message} (got {first.get('input')!r})")
