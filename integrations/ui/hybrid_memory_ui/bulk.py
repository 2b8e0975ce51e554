"""Changes to many memories at once: a selection, or every memory a filter matches,
deleted or re-tagged (a tag renamed, merged or removed is a re-tag of the memories
carrying it). Nothing is changed before a preview: :meth:`Bulk.preview` reads the exact
memories the change would touch (how many, the first of them, and a digest of their
ids); :meth:`Bulk.apply` reads them again and changes them only if the digest is the
same, so a confirmed change touches exactly the memories its preview showed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from hybrid_memory import HybridMemory, Memory
from hybrid_memory_ui.filters import PageFilter

ACTIONS = ("delete", "retag")
#: How many of the memories a change touches its preview shows.
SHOWN = 10
_BATCH = 500


class ChangedMeanwhile(ValueError):
    """The memories a change would touch are not those its preview showed."""


@dataclass(frozen=True)
class Preview:
    """What a change would touch now: ``count`` memories, the ``first`` of them, and
    the ``digest`` of all their ids (what the confirmation carries); ``considered``: the
    memories selected or matching, of which a re-tag leaves out those it would not
    change."""

    count: int
    first: list[Memory]
    digest: str
    considered: int


def digest_of(ids: Sequence[str]) -> str:
    """A short fingerprint of a set of ids (order does not matter)."""
    joined = "\n".join(sorted(set(ids))).encode()
    return hashlib.sha256(joined).hexdigest()[:32]


@dataclass(frozen=True)
class Bulk:
    """What a bulk change acts on: ``ids`` (a selection) when ``page`` is None, else
    every memory ``page`` matches."""

    action: str
    ids: tuple[str, ...]
    page: PageFilter | None
    add_tags: tuple[str, ...] = ()
    remove_tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action: expected one of {', '.join(ACTIONS)}, got {self.action!r}")
        if self.action == "retag" and not (self.add_tags or self.remove_tags):
            raise ValueError("tags: give tags to add or to remove")
        if self.page is None and not self.ids:
            raise ValueError(
                "selection: no memory is selected; tick some, or choose "
                "'everything matching this filter'"
            )
        if self.page is not None and not self.page.valid:
            raise ValueError("filter: the page's filter could not be read; nothing to change")

    @property
    def by_selection(self) -> bool:
        return self.page is None

    def target_ids(self, view: HybridMemory) -> list[str]:
        """The ids the change acts on, read now (all of them before any is changed, so a
        re-tag that takes a memory out of the filter does not shift the pages read). A
        re-tag leaves out the memories it would not change."""
        return self._targets(view)[0]

    def _targets(self, view: HybridMemory) -> tuple[list[str], int]:
        if self.page is None:  # in the order selected (the page's)
            found = view.existing(list(self.ids))
            ids = [i for i in dict.fromkeys(self.ids) if i in found]
        else:
            where = self.page.with_time()
            ids = []
            while True:
                batch = view.list_memories(where, limit=_BATCH, offset=len(ids), newest_first=True)
                ids.extend(m.id for m in batch)
                if len(batch) < _BATCH:
                    break
        considered = len(ids)
        if self.action == "retag":
            ids = [m.id for m in self._memories(view, ids) if self._retagged(m) != tuple(m.tags)]
        return ids, considered

    def preview(self, view: HybridMemory) -> Preview:
        ids, considered = self._targets(view)
        first = view.get_many(ids[:SHOWN]) if ids else []
        return Preview(count=len(ids), first=first, digest=digest_of(ids), considered=considered)

    def apply(self, view: HybridMemory, digest: str) -> int:
        """Make the change, if the memories it touches are still those of the preview
        whose ``digest`` is given (else :class:`ChangedMeanwhile`, and nothing changes);
        returns how many memories it changed."""
        ids = self.target_ids(view)
        if digest_of(ids) != digest:
            raise ChangedMeanwhile(
                "the memories this change would touch are no longer those the preview "
                f"showed (now {len(ids)}): nothing was changed; look at the new preview"
            )
        if self.action == "delete":
            done = 0
            for start in range(0, len(ids), _BATCH):
                chunk = ids[start : start + _BATCH]
                present = view.existing(chunk)  # another process may have deleted some
                chunk = [i for i in chunk if i in present]
                if chunk:
                    done += view.delete(chunk)
            return done
        changed = 0
        for memory in self._memories(view, ids):
            tags = self._retagged(memory)
            if tags != tuple(memory.tags):
                view.update(memory.id, tags=tags)
                changed += 1
        return changed

    def _memories(self, view: HybridMemory, ids: Sequence[str]) -> list[Memory]:
        out: list[Memory] = []
        for start in range(0, len(ids), _BATCH):
            out += view.get_many(list(ids[start : start + _BATCH]))
        return out

    def _retagged(self, memory: Memory) -> tuple[str, ...]:
        return retagged(memory.tags, self.add_tags, self.remove_tags)


def retagged(tags: Sequence[str], add: Sequence[str], remove: Sequence[str]) -> tuple[str, ...]:
    """``tags`` without ``remove`` and with ``add`` (appended, once each)."""
    gone = {t.lower() for t in remove}
    kept = [t for t in tags if t.lower() not in gone]
    have = {t.lower() for t in kept}
    return tuple(kept + [t for t in dict.fromkeys(add) if t.lower() not in have])
