"""Reading a collection's records, a page at a time: one get of 100,000 ids exceeds
SQLite's limit on bound variables, and one read of everything holds it all at once.

The vectors of a namespace's share read whole (:meth:`PagedReads.rows` with
``keep_vectors``) are kept for the search that follows, which would read them again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from hybrid_memory._model.errors import MemoryNotFoundError
from hybrid_memory._model.records import IndexRow, row_from_chroma, rows_from_chroma

PAGE = 5000  # records per Chroma read


class PagedReads:
    """The reads of records a :class:`~hybrid_memory._store.collection.ChromaCollection`
    makes, each through its :meth:`call`."""

    #: Among at most this many records, the nearest are found by reading their vectors
    #: and comparing them all: Chroma's graph search restricted to few ids degrades.
    compare_all = 256
    _kept: KeptVectors

    def call(self, operation: str, **kwargs: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def rows(
        self, where: Mapping[str, Any] | None = None, *, keep_vectors: bool = False
    ) -> Iterator[list[IndexRow]]:
        """Every record passing ``where`` (Chroma syntax), a page at a time.
        ``keep_vectors``: their vectors read too and kept for :meth:`kept_vectors`."""
        include = ["documents", "metadatas", *(["embeddings"] if keep_vectors else [])]
        if keep_vectors:
            self._kept.clear()
        offset = 0
        while True:
            got = self.call("get", where=where, limit=PAGE, offset=offset, include=include)
            if not got["ids"]:
                return
            page = rows_from_chroma(got)
            if keep_vectors and not self._kept.keep(page, got["embeddings"], self.compare_all):
                keep_vectors = False  # more than a search would take
                include = include[:2]
            yield page
            if len(got["ids"]) < PAGE:
                return  # the last page: asking for the next is one more scan
            offset += len(got["ids"])

    def rows_by_id(self, ids: Sequence[str]) -> Iterator[list[IndexRow]]:
        """The records with these ids (those that exist), a page at a time: one get with
        100,000 ids exceeds SQLite's limit on bound variables."""
        for start in range(0, len(ids), PAGE):
            page = list(ids[start : start + PAGE])
            yield rows_from_chroma(self.call("get", ids=page, include=["documents", "metadatas"]))

    def all_ids(self) -> set[str]:
        """Every record's id, in one read: read a page at a time, each page's offset costs
        Chroma a scan to it, which makes the pages of a large store take minutes (the ids
        are all held in the returned set anyway)."""
        return set(self.call("get", include=[])["ids"])

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` name a stored record."""
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))  # Chroma refuses a repeated id
        for start in range(0, len(unique), PAGE):
            found.update(self.call("get", ids=unique[start : start + PAGE], include=[])["ids"])
        return found

    def metadata_by_id(self, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """The stored metadata of those of ``ids`` that exist."""
        found: dict[str, Mapping[str, Any]] = {}
        unique = list(dict.fromkeys(ids))  # Chroma refuses a repeated id
        for start in range(0, len(unique), PAGE):
            got = self.call("get", ids=unique[start : start + PAGE], include=["metadatas"])
            found.update((i, m or {}) for i, m in zip(got["ids"], got["metadatas"], strict=True))
        return found

    def stored(self, memory_id: str) -> tuple[IndexRow, Mapping[str, Any], Any]:
        """The memory with this id: its row, its metadata as stored, and its vector;
        :class:`MemoryNotFoundError` when there is none."""
        return self.stored_many([memory_id])[memory_id]

    def stored_many(self, ids: Sequence[str]) -> dict[str, tuple[IndexRow, Mapping[str, Any], Any]]:
        """:meth:`stored` for many ids (distinct), a page at a time: each must exist, else
        :class:`MemoryNotFoundError` for the first that does not."""
        found: dict[str, tuple[IndexRow, Mapping[str, Any], Any]] = {}
        for start in range(0, len(ids), PAGE):
            got = self.call(
                "get",
                ids=list(ids[start : start + PAGE]),
                include=["documents", "metadatas", "embeddings"],
            )
            for memory_id, document, metadata, vector in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            ):
                found[memory_id] = (
                    row_from_chroma(memory_id, document, metadata),
                    metadata or {},
                    vector,
                )
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            raise MemoryNotFoundError.of(missing)
        return found

    def any_passing(self, where: Mapping[str, Any]) -> bool:
        """Whether any record passes ``where`` (Chroma syntax): one id read, at most."""
        return bool(self.call("get", where=where, limit=1, include=[])["ids"])

    def updated_at_after(self, since: float, key: str) -> dict[str, float]:
        """``{id: updated_at}`` of every record stamped (``key``) after ``since``, a page
        at a time (the metadata only: no documents, no vectors)."""
        found: dict[str, float] = {}
        where = {key: {"$gt": since}}
        while True:
            got = self.call(
                "get", where=where, limit=PAGE, offset=len(found), include=["metadatas"]
            )
            for memory_id, meta in zip(got["ids"], got["metadatas"], strict=True):
                found[memory_id] = float((meta or {}).get(key) or 0.0)
            if len(got["ids"]) < PAGE:
                return found  # the last page

    def ids_matching(self, where: Mapping[str, Any] | None) -> list[str]:
        """The ids of every record passing ``where`` (Chroma syntax), read a page at a time."""
        found: list[str] = []
        while True:
            got = self.call("get", where=where, limit=PAGE, offset=len(found), include=[])
            found.extend(got["ids"])
            if len(got["ids"]) < PAGE:
                return found  # the last page

    @property
    def holds_kept_vectors(self) -> bool:
        return bool(self._kept)

    def kept_vectors(
        self, ids: Sequence[str], updated_at: Mapping[str, float]
    ) -> dict[str, np.ndarray] | None:
        """The vectors of ``ids`` as the last ``rows(keep_vectors=True)`` read them, when
        it read every one and each record is still as it was then (``updated_at``, the
        index's, is the read's); None otherwise. Kept for this one call either way: a
        namespace's first search after its share was read takes them instead of reading
        them again."""
        return self._kept.take(ids, updated_at)

    def vectors_by_id(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of ``ids`` that exist, by id (a few: one read)."""
        if not ids:
            return {}  # Chroma refuses a get by no ids
        got = self.call("get", ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v) for i, v in zip(got["ids"], got["embeddings"], strict=True)}


class KeptVectors:
    """The vectors of the last read of a namespace's whole share, by id, with the
    ``updated_at`` they were read at; no more than a search compares one by one."""

    def __init__(self) -> None:
        self._vectors: dict[str, tuple[float, np.ndarray]] = {}

    def __bool__(self) -> bool:
        return bool(self._vectors)

    def clear(self) -> None:
        self._vectors = {}

    def keep(self, page: list[IndexRow], vectors: Any, most: int) -> bool:
        """Keep a page's vectors; False (and none kept) once there are more than
        ``most``."""
        self._vectors.update(
            (row.id, (row.updated_at, np.asarray(vector)))
            for row, vector in zip(page, vectors, strict=True)
        )
        if len(self._vectors) > most:
            self._vectors = {}
            return False
        return True

    def take(
        self, ids: Sequence[str], updated_at: Mapping[str, float]
    ) -> dict[str, np.ndarray] | None:
        """The kept vectors of ``ids``, if every one is kept as it still is; None
        otherwise. Forgotten either way: they serve one search."""
        kept, self._vectors = self._vectors, {}
        out: dict[str, np.ndarray] = {}
        for memory_id in ids:
            entry = kept.get(memory_id)
            if entry is None or updated_at.get(memory_id) != entry[0]:
                return None
            out[memory_id] = entry[1]
        return out
