"""What a write did: the values :meth:`HybridMemory.add`, ``add_many`` and ``delete``
hand back.

Each is the value those methods always returned (an id, a list of ids, a count), so
existing callers keep working, and carries what happened besides, decided by the writer
under its lock: not guessed afterwards from the clock or from a second read, which
another writer can overtake.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

#: What an add did with one memory: ``"added"`` (a new memory was written),
#: ``"duplicate"`` (nothing written: a memory without an id whose text and metadata are
#: stored already, or were given earlier in the same call; the existing id is returned)
#: or ``"replaced"`` (a memory with this id existed, and ``upsert=True`` wrote over it).
AddOutcome = Literal["added", "duplicate", "replaced"]
ADDED: AddOutcome = "added"
DUPLICATE: AddOutcome = "duplicate"
REPLACED: AddOutcome = "replaced"
ADD_OUTCOMES: tuple[AddOutcome, ...] = (ADDED, DUPLICATE, REPLACED)


class AddResult(str):
    """The id :meth:`HybridMemory.add` stored or found, and what it did.

    It is the id itself (a ``str``: compare it, store it, pass it back as an id), with
    ``outcome`` saying what happened: ``"added"``, ``"duplicate"`` (the text was stored
    already with the same metadata: nothing was written and this is the existing
    memory's id) or ``"replaced"`` (``upsert=True`` over an existing id)::

        first = memory.add("Alice prefers dark mode")
        again = memory.add("Alice prefers dark mode")
        first.outcome, again.outcome, again == first      # ("added", "duplicate", True)
    """

    outcome: AddOutcome

    def __new__(cls, memory_id: str, outcome: AddOutcome) -> AddResult:
        """The id ``memory_id`` with the ``outcome`` of the add that returned it."""
        if outcome not in ADD_OUTCOMES:
            raise ValueError(f"outcome: expected one of {', '.join(ADD_OUTCOMES)}, not {outcome!r}")
        result = super().__new__(cls, memory_id)
        result.outcome = outcome
        return result

    @property
    def id(self) -> str:
        """The memory's id as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.id, self.outcome))


class WriteReport(list[str]):
    """The ids :meth:`HybridMemory.add_many` stored or found, in the order of the items,
    and what it did with each.

    It is the list of ids (one per item, as ever; typed ``list[str]``, so code that took
    the ids keeps type-checking). ``results`` holds the same ids as :class:`AddResult`
    values, whose ``outcome`` tells each item's fate; ``added``, ``duplicates`` and
    ``replaced`` gather the ids by outcome (each id once, in order of first appearance)
    and ``written`` counts the memories the call wrote::

        report = memory.add_many(["a fact", "another fact", "a fact"])
        report.added, report.duplicates      # ((id1, id2), (id1,)): the third was a repeat
        report.results[2].outcome            # "duplicate"
    """

    def __init__(self, results: Iterable[AddResult] = ()) -> None:
        """The report of the ``results`` of one call, in the order of its items."""
        kept = tuple(results)
        super().__init__(kept)
        self._results = kept

    @property
    def results(self) -> tuple[AddResult, ...]:
        """Each item's id with its outcome, in the order of the items (as written: not
        changed by later edits of this list)."""
        return self._results

    def _ids(self, outcome: AddOutcome) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.id for r in self._results if r.outcome == outcome))

    @property
    def added(self) -> tuple[str, ...]:
        """The ids of the new memories this call wrote."""
        return self._ids(ADDED)

    @property
    def duplicates(self) -> tuple[str, ...]:
        """The ids returned for items that were not written: their text and metadata
        were stored already (or given by an earlier item of the call)."""
        return self._ids(DUPLICATE)

    @property
    def replaced(self) -> tuple[str, ...]:
        """The ids of existing memories this call wrote over (``upsert=True``)."""
        return self._ids(REPLACED)

    @property
    def written(self) -> int:
        """How many memories this call wrote (added or replaced)."""
        return len(set(self.added) | set(self.replaced))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._results,))


class DeleteReport(int):
    """How many memories :meth:`HybridMemory.delete` deleted (an ``int``, as ever), and
    which: ``ids``, each once, in the order they were deleted."""

    ids: tuple[str, ...]

    def __new__(cls, ids: Iterable[str]) -> DeleteReport:
        """The report of a delete of ``ids`` (repeats counted once)."""
        unique = tuple(dict.fromkeys(ids))
        report = super().__new__(cls, len(unique))
        report.ids = unique
        return report

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.ids,))
