"""The read half of :class:`~hybrid_memory.HybridMemory`: memories by id, counts, pages
through a listing, the tags, the store's figures, and the keyword index kept up with the
collection (the public methods' docstrings say what each does)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hybrid_memory._memory.repairing import repairing
from hybrid_memory._memory.scope import StoreScope
from hybrid_memory._model.errors import InvalidInputError, MemoryNotFoundError
from hybrid_memory._model.inputs import valid_id, valid_ids, valid_k, valid_page
from hybrid_memory._model.near_duplicates import NearDuplicateRule
from hybrid_memory._model.records import to_memory
from hybrid_memory._model.results import Memory, StoreStats
from hybrid_memory._model.write_outcomes import SimilarMemory
from hybrid_memory._store.similar import similar_to


class Reading(StoreScope):
    """Reads of one store or view."""

    @repairing
    def sync(self, *, full: bool, reconcile: bool) -> None:
        self._parts.sync.sync(full=full, reconcile=reconcile)

    @repairing
    def get_many(self, ids: Sequence[str]) -> list[Memory]:
        id_list = valid_ids(ids)
        if not id_list:
            return []
        unique = list(dict.fromkeys(id_list))  # Chroma refuses a repeated id
        found = {
            row.id: to_memory(row)
            for page in self._parts.collection.rows_by_id(unique)
            for row in page
        }
        missing = [i for i in unique if i not in found]
        if missing:
            raise MemoryNotFoundError.of(missing)
        return [found[i] for i in id_list]

    def existing(self, ids: str | Sequence[str]) -> set[str]:
        return self._parts.collection.existing(valid_ids(ids))

    @repairing
    def count(self, filter: Mapping[str, Any] | None) -> int:
        if filter is None:
            return self._parts.collection.count()
        self._parts.sync.wait_warm()
        node = self._parse_filter(filter)
        if node is None:
            return self._parts.collection.count()
        self._maybe_sync()
        return self._parts.index.count(node)

    @repairing
    def list_memories(
        self,
        filter: Mapping[str, Any] | None,
        *,
        limit: int | None,
        offset: int,
        newest_first: bool,
    ) -> list[Memory]:
        valid_page(limit, offset)
        if not isinstance(newest_first, bool):
            raise InvalidInputError("newest_first", f"expected True or False, got {newest_first!r}")
        node = self._parse_filter(filter)  # the same checks as count, search and delete
        if limit == 0:
            return []
        self._parts.sync.wait_warm()
        self._maybe_sync()
        ids = self._parts.index.page(node, limit, offset, newest_first=newest_first)
        return self._parts.searcher.memories(ids, len(ids))

    @repairing
    def tags(self) -> list[str]:
        self._parts.sync.wait_warm()
        self._maybe_sync()
        return sorted(self._parts.index.all_tags())

    @repairing
    def stats(self) -> StoreStats:
        self._maybe_sync()
        s, parts = self.settings, self._parts
        if s.url:
            kind, location = "server", s.url
        elif s.path:
            kind, location = "embedded", s.path
        else:
            kind, location = ("client" if parts.given_client else "in-memory"), None
        return StoreStats(
            count=parts.collection.count(),
            indexed=parts.index.count(),
            tags=len(parts.index.all_tags()),
            kind=kind,
            location=location,
            collection=parts.collection.name,
            index_path=parts.index.path,
            embedding=parts.embedder.name,
            dimension=parts.collection.dimension,
            namespace=parts.namespace_path,
            sync_interval=s.sync_interval,
        )

    @repairing
    def similar(self, id: str, *, k: int) -> tuple[SimilarMemory, ...]:
        memory_id = valid_id(id)
        nearest = valid_k(k, self.settings.max_k)
        row, _, vector = self._parts.collection.stored(memory_id)
        rule = NearDuplicateRule.of(self.settings)
        return similar_to(self._parts.collection, memory_id, row.text, vector, rule, nearest)
