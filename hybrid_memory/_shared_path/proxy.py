"""A non-owner's view of a shared embedded store path: the parts of a Chroma client and
collection a store uses, each call one request answered by the owner of the path, with a
deadline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol


class Performer(Protocol):
    """What the proxy sends its requests through: this process's share of the path
    (:class:`~hybrid_memory._shared_path.ownership.PathOwnership`), which asks the owner."""

    def perform(
        self, target: str | None, operation: str, kwargs: dict[str, Any], timeout: float
    ) -> Any: ...


class ProxyClient:
    """The part of a Chroma client a store uses, answered by the owner of the path;
    each request fails with StoreError when the owner does not answer within ``timeout``
    seconds (the store's ``request_timeout``)."""

    def __init__(self, ownership: Performer, timeout: float) -> None:
        self._ownership = ownership
        self._timeout = timeout

    def get_or_create_collection(
        self,
        name: str,
        configuration: Any = None,
        metadata: Any = None,
        embedding_function: Any = None,
    ) -> ProxyCollection:
        got = self._ownership.perform(
            None,
            "get_or_create_collection",
            {"name": name, "configuration": configuration, "metadata": metadata},
            self._timeout,
        )
        return ProxyCollection(self._ownership, name, got["id"], got["metadata"], self._timeout)

    def get_max_batch_size(self) -> int:
        return int(self._ownership.perform(None, "get_max_batch_size", {}, self._timeout))

    def delete_collection(self, name: str) -> None:
        self._ownership.perform(None, "delete_collection", {"name": name}, self._timeout)

    def list_collections(self) -> list[CollectionInfo]:
        """Every collection on the path, as the owner lists them: name and metadata."""
        found = self._ownership.perform(None, "list_collections", {}, self._timeout)
        return [CollectionInfo(c["name"], c["metadata"]) for c in found]


class CollectionInfo(NamedTuple):
    """A collection as :meth:`ProxyClient.list_collections` gives it."""

    name: str
    metadata: dict[str, Any] | None


class ProxyCollection:
    """The part of a Chroma collection a store uses, answered by the owner of the path."""

    def __init__(
        self,
        ownership: Performer,
        name: str,
        collection_id: str,
        metadata: Any,
        timeout: float,
    ) -> None:
        self._ownership = ownership
        self._timeout = timeout
        self.name = name
        self.id = collection_id
        self.metadata = metadata

    def _call(self, operation: str) -> Callable[..., Any]:
        def call(**kwargs: Any) -> Any:
            return self._ownership.perform(self.name, operation, kwargs, self._timeout)

        return call

    def get(self, **kwargs: Any) -> Any:
        return self._call("get")(**kwargs)

    def query(self, **kwargs: Any) -> Any:
        return self._call("query")(**kwargs)

    def add(self, **kwargs: Any) -> Any:
        return self._call("add")(**kwargs)

    def upsert(self, **kwargs: Any) -> Any:
        return self._call("upsert")(**kwargs)

    def delete(self, **kwargs: Any) -> Any:
        return self._call("delete")(**kwargs)

    def count(self) -> int:
        return int(self._call("count")())

    def modify(self, **kwargs: Any) -> None:
        self.metadata = self._call("modify")(**kwargs)
