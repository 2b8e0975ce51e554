"""Bulk changes: a selection of memories, or every memory matching a filter, deleted or
re-tagged. The page shows :meth:`Bulk.count` first and applies only after a confirmation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hybrid_memory import HybridMemory
from hybrid_memory_ui.filters import PageFilter

ACTIONS = ("delete", "retag")
_BATCH = 500


@dataclass(frozen=True)
class Bulk:
    """What a bulk change acts on: ``ids`` (a selection) when given, else every memory
    ``page`` matches (all memories for an empty filter)."""

    action: str
    ids: tuple[str, ...]
    page: PageFilter
    add_tags: tuple[str, ...] = ()
    remove_tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action: expected one of {', '.join(ACTIONS)}, got {self.action!r}")
        if self.action == "retag" and not (self.add_tags or self.remove_tags):
            raise ValueError("tags: give tags to add or to remove")

    @property
    def by_selection(self) -> bool:
        return bool(self.ids)

    def count(self, view: HybridMemory) -> int:
        """How many memories the change would touch now."""
        if self.ids:
            return len(view.existing(list(self.ids)))
        return view.count(self.page.with_time())

    def target_ids(self, view: HybridMemory) -> list[str]:
        """The ids the change acts on, read now (all of them before any is changed, so a
        re-tag that takes a memory out of the filter does not shift the pages read)."""
        if self.ids:
            found = view.existing(list(self.ids))
            return [i for i in self.ids if i in found]
        where = self.page.with_time()
        ids: list[str] = []
        while True:
            batch = view.list_memories(where, limit=_BATCH, offset=len(ids))
            ids.extend(m.id for m in batch)
            if len(batch) < _BATCH:
                return ids

    def apply(self, view: HybridMemory) -> int:
        """Make the change; returns how many memories it touched."""
        ids = self.target_ids(view)
        if self.action == "delete":
            done = 0
            for start in range(0, len(ids), _BATCH):
                chunk = ids[start : start + _BATCH]
                # Another process may have deleted some since they were read.
                chunk = [i for i in chunk if i in view.existing(chunk)]
                if chunk:
                    done += view.delete(chunk)
            return done
        return self._retag(view, ids)

    def _retag(self, view: HybridMemory, ids: Sequence[str]) -> int:
        changed = 0
        for start in range(0, len(ids), _BATCH):
            chunk = list(ids[start : start + _BATCH])
            present = view.existing(chunk)
            for memory in view.get_many([i for i in chunk if i in present]):
                tags = retagged(memory.tags, self.add_tags, self.remove_tags)
                if tags != tuple(memory.tags):
                    view.update(memory.id, tags=tags)
                    changed += 1
        return changed


def retagged(tags: Sequence[str], add: Sequence[str], remove: Sequence[str]) -> tuple[str, ...]:
    """``tags`` without ``remove`` and with ``add`` (appended, once each)."""
    gone = {t.lower() for t in remove}
    kept = [t for t in tags if t.lower() not in gone]
    have = {t.lower() for t in kept}
    return tuple(kept + [t for t in dict.fromkeys(add) if t.lower() not in have])
