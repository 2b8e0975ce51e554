"""The write half of :class:`~hybrid_memory.HybridMemory`: add, update and delete, each
checked in full before anything is written (the public methods' docstrings say what each
does)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from hybrid_memory._memory.repairing import repairing
from hybrid_memory._memory.scope import StoreScope
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.inputs import (
    PendingMemories,
    new_memory,
    valid_change,
    valid_changes,
    valid_ids,
)
from hybrid_memory._model.near_duplicates import NearDuplicateRule
from hybrid_memory._model.records import to_memory
from hybrid_memory._model.results import Memory
from hybrid_memory._model.write_outcomes import (
    ON_SIMILAR,
    AddResult,
    DeleteReport,
    OnSimilar,
    WriteReport,
)
from hybrid_memory._search.supersession import check_links
from hybrid_memory._store.similar import SimilarCheck


class Writing(StoreScope):
    """Writes of one store or view."""

    @repairing
    def add(
        self,
        text: str,
        *,
        id: str | None,
        tags: Iterable[str] | None,
        metadata: Mapping[str, Any] | None,
        created_at: datetime | str | float | None,
        upsert: bool,
        allow_duplicates: bool,
        supersedes: str | None,
        on_similar: OnSimilar | None,
    ) -> AddResult:
        item = dict(text=text, id=id, tags=tags, metadata=metadata, created_at=created_at)
        if supersedes is not None:
            item["supersedes"] = supersedes
        memories = PendingMemories.of([new_memory(item, "", self.settings)])
        written = self._add(
            memories,
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            on_similar=on_similar,
            one=True,
        )
        return written.results[0]

    @repairing
    def add_many(
        self,
        items: Iterable[str | Mapping[str, Any]],
        *,
        upsert: bool,
        allow_duplicates: bool,
        on_similar: OnSimilar | None,
    ) -> WriteReport:
        if isinstance(items, (str, Mapping)):
            raise InvalidInputError("items", "expected a list of texts or dicts, not a single one")
        given = items if isinstance(items, Sequence) else list(items)
        memories = PendingMemories.of_items(given, self.settings)
        return self._add(
            memories, upsert=upsert, allow_duplicates=allow_duplicates, on_similar=on_similar
        )

    def _add(
        self,
        memories: PendingMemories,
        *,
        upsert: bool,
        allow_duplicates: bool,
        on_similar: OnSimilar | None,
        one: bool = False,
    ) -> WriteReport:
        policy = self.settings.on_similar if on_similar is None else on_similar
        if policy not in ON_SIMILAR:
            raise InvalidInputError(
                "on_similar", f"expected one of {', '.join(ON_SIMILAR)}, got {on_similar!r}"
            )
        if memories.links:
            self._check_links(
                [
                    ("supersedes" if one else f"items[{p}].supersedes", memories.ids[p], target)
                    for p, target in memories.links.items()
                ],
                [i for i in memories.ids if i is not None],
            )
        return self._parts.writer.add(
            memories,
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            sync_interval=self.settings.sync_interval,
            similar=SimilarCheck(NearDuplicateRule.of(self.settings), policy),
        )

    @repairing
    def update(
        self,
        id: str,
        *,
        text: str | None,
        tags: Iterable[str] | None,
        metadata: Mapping[str, Any] | None,
        supersedes: str | None,
    ) -> Memory:
        item = {"id": id, "text": text, "tags": tags, "metadata": metadata}
        change = valid_change(item | {"supersedes": supersedes}, "", self.settings)
        if change.supersedes is not None:
            self._check_links([("supersedes", change.id, change.supersedes)])
        return to_memory(self._parts.writer.update([change])[0])

    @repairing
    def update_many(self, updates: Iterable[Mapping[str, Any]]) -> list[Memory]:
        changes = valid_changes(updates, self.settings)
        if not changes:
            return []
        self._check_links(
            (f"updates[{n}].supersedes", c.id, c.supersedes)
            for n, c in enumerate(changes)
            if c.supersedes is not None
        )
        return [to_memory(row) for row in self._parts.writer.update(changes)]

    def _check_links(
        self, links: Iterable[tuple[str, str | None, str]], written_with: Iterable[str] = ()
    ) -> None:
        check_links(links, self._parts.collection, written_with)

    @repairing
    def delete(
        self, ids: str | Sequence[str] | None, *, filter: Mapping[str, Any] | None
    ) -> DeleteReport:
        if (ids is None) == (filter is None):
            raise InvalidInputError("delete", "give exactly one of ids or filter")
        if ids is not None:
            return self._parts.writer.delete(valid_ids(ids))
        node = self._parse_filter(filter)
        if node is None:
            raise InvalidInputError(
                "filter", "an empty filter would delete everything; pass ids instead"
            )
        return self._parts.writer.delete_matching(node)
