"""A command line's reads of a store another process holds, answered by that process
(:mod:`hybrid_memory._shared_path.reads`, :mod:`hybrid_memory._memory.read_service`):
:class:`OwnerReads` has the read methods the commands call on a store, each one request
to the owner. Light on purpose: no Chroma, numpy, pydantic or model is imported here,
which is what makes such a command fast.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hybrid_memory._model.errors import StoreError
from hybrid_memory._shared_path.reads import NOT_SERVED, OwnerLink, reach_owner

if TYPE_CHECKING:
    from hybrid_memory._model.results import Memory, SearchResult, StoreStats

#: The environment variables that configure a store.
ENV_PREFIX = "HYBRID_MEMORY_"
_DEFAULT_TIMEOUT = 30.0  # HybridMemorySettings.request_timeout's default


def store_environment() -> dict[str, str]:
    """This process's ``HYBRID_MEMORY_*`` variables (the owner reads them as this process's
    settings would)."""
    return {k: v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}


def request_timeout(environment: Mapping[str, str]) -> float:
    """The deadline of each request: the ``request_timeout`` setting, read from the
    environment (an invalid value: the default; opening the store names it)."""
    for key, value in environment.items():
        if key.upper() == f"{ENV_PREFIX}REQUEST_TIMEOUT":
            try:
                return max(float(value), 0.1)
            except ValueError:
                break
    return _DEFAULT_TIMEOUT


class OwnerReads:
    """The reads of one store (or namespace) of the path, asked of the process that owns
    it. Made by :func:`owner_reads`; :meth:`close` ends the link."""

    def __init__(self, link: OwnerLink, request: dict[str, Any]) -> None:
        self._link = link
        self._request = request

    @property
    def namespace_path(self) -> tuple[str, ...]:
        return tuple(self._request["namespace"])

    def _ask(self, method: str, *args: Any, **kwargs: Any) -> Any:
        answer = self._link.ask({**self._request, "call": (method, args, kwargs)})
        if answer is None or answer[0] == NOT_SERVED:
            why = "it went away" if answer is None else answer[1]
            raise StoreError(f"the process owning the store stopped answering ({why}); run again")
        status, value = answer
        if status == "raise":
            raise value
        return value

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
    ) -> SearchResult:
        tag_list = None if tags is None else list(tags)
        return self._ask("search", query, k=k, filter=filter, tags=tag_list)

    def list_memories(
        self,
        filter: Mapping[str, Any] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Memory]:
        return self._ask(
            "list_memories", filter, limit=limit, offset=offset, newest_first=newest_first
        )

    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        return int(self._ask("count", filter))

    def get(self, id: str) -> Memory:
        return self._ask("get", id)

    def get_many(self, ids: Sequence[str]) -> list[Memory]:
        return self._ask("get_many", list(ids))

    def tags(self) -> list[str]:
        return list(self._ask("tags"))

    def stats(self) -> StoreStats:
        return self._ask("stats")

    def namespaces(self) -> list[str]:
        return list(self._ask("namespaces"))

    def close(self) -> None:
        self._link.close()


def owner_reads(
    path: str,
    *,
    collection: str | None,
    namespace: Sequence[str],
    embedding_name: str | None,
    custom_embedding: bool,
) -> OwnerReads | None:
    """The reads of the store at ``path`` (its ``collection``, or the environment's, and
    ``namespace``), answered by the process owning the path; None when no process owns
    it or the owner cannot stand in for this one (then open the store). Raises what the
    owner raised for the store itself: :class:`StoreNotFoundError` for a namespace that
    does not exist."""
    environment = store_environment()
    link = reach_owner(path, request_timeout(environment))
    if link is None:
        return None
    request = {
        "collection": collection,
        "namespace": list(namespace),
        "environment": environment,
        "embedding_name": embedding_name,
        "custom_embedding": custom_embedding,
    }
    answer = link.ask({**request, "call": None})
    if answer is None or answer[0] == NOT_SERVED:
        link.close()
        return None
    if answer[0] == "raise":
        link.close()
        raise answer[1]
    return OwnerReads(link, request)
