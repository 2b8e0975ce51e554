"""The records nearest a vector: compared one by one when they are few, else by Chroma's
graph search (approximate, and slower than reading a few vectors when restricted to a
few ids or to a namespace's share)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from hybrid_memory._embedding.vectors import Vector, nearest_by_cosine
from hybrid_memory._model.errors import StoreError
from hybrid_memory._store.paged_reads import PAGE

# How many times a restricted search is asked again after ids vanished under it.
_VANISHED_RETRIES = 3


class Searched(Protocol):
    """What a nearest-neighbour search needs of a collection."""

    partition: str | None
    compare_all: int  # among at most this many, compare every vector

    def call(self, operation: str, **kwargs: Any) -> Any: ...

    def existing(self, ids: Sequence[str]) -> set[str]: ...


def nearest(
    collection: Searched, vector: Vector, n: int, where: dict[str, Any] | None
) -> dict[str, float]:
    """The ``n`` nearest records passing ``where``: ``{id: cosine similarity}``, nearest
    first.

    A namespace's records, when they are few, are read and compared one by one: Chroma's
    query restricted by a ``where`` scans the whole shared collection, its ``get`` by the
    same ``where`` does not."""
    if collection.partition is not None and n > 0:
        got = collection.call(
            "get", where=where, limit=collection.compare_all + 1, include=["embeddings"]
        )
        if len(got["ids"]) <= collection.compare_all:
            found = got["ids"]
            return {
                found[row]: similarity
                for row, similarity in nearest_by_cosine(got["embeddings"], vector, n)
            }
    got = collection.call(
        "query",
        query_embeddings=[vector],
        n_results=n,
        where=where,
        # Distances only: every other include costs Chroma more than the search
        # itself; the few hits returned are read by id afterwards.
        include=["distances"],
    )
    return _similarities(got)


def nearest_among(collection: Searched, vector: Vector, n: int, ids: list[str]) -> dict[str, float]:
    """The ``n`` nearest among ``ids`` only: compared one by one when they are few, else
    Chroma's graph search restricted to them.

    Ids deleted since they were chosen (by another thread or process) are simply not
    found: reading vectors skips them, and Chroma's restricted search, which fails when
    any listed id is gone ("Error finding id"), is asked again among those that exist."""
    if not ids:
        return {}
    if len(ids) <= collection.compare_all:
        return _nearest_by_reading(collection, vector, n, ids)
    for _ in range(_VANISHED_RETRIES):
        try:
            got = collection.call(
                "query",
                query_embeddings=[vector],
                n_results=min(n, len(ids)),
                ids=ids,
                include=["distances"],
            )
            return _similarities(got)
        except StoreError:
            present = collection.existing(ids)
            if len(present) == len(ids):
                raise  # not a vanished id
            ids = [i for i in ids if i in present]
            if len(ids) <= collection.compare_all:
                return _nearest_by_reading(collection, vector, n, ids)
    return _nearest_by_reading(collection, vector, n, ids)


def _nearest_by_reading(
    collection: Searched, vector: Vector, n: int, ids: list[str]
) -> dict[str, float]:
    nearest: list[tuple[str, float]] = []
    for start in range(0, len(ids), PAGE):
        got = collection.call("get", ids=ids[start : start + PAGE], include=["embeddings"])
        if got["ids"]:
            found = got["ids"]
            nearest.extend(
                (found[row], similarity)
                for row, similarity in nearest_by_cosine(got["embeddings"], vector, n)
            )
    nearest.sort(key=lambda pair: -pair[1])
    return dict(nearest[:n])


def _similarities(got: Mapping[str, Any]) -> dict[str, float]:
    """A one-query Chroma result as ``{id: cosine similarity}`` in rank order (the
    collection's distance is cosine: 1 - similarity)."""
    return {i: 1.0 - float(d) for i, d in zip(got["ids"][0], got["distances"][0], strict=True)}
