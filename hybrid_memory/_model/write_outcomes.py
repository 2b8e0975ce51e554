"""What a write did: the values :meth:`HybridMemory.add`, ``add_many`` and ``delete``
hand back.

Each is the value those methods always returned (an id, a list of ids, a count), so
existing callers keep working, and carries what happened besides, decided by the writer
under its lock: not guessed afterwards from the clock or from a second read, which
another writer can overtake.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

#: What an add did with one memory: ``"added"`` (a new memory was written),
#: ``"duplicate"`` (nothing written: a memory without an id whose text and metadata are
#: stored already, or were given earlier in the same call; the existing id is returned),
#: ``"replaced"`` (a memory with this id existed, and ``upsert=True`` wrote over it) or
#: ``"similar"`` (stored memories say nearly the same thing: what was done then is the
#: call's ``on_similar``, see :class:`AddResult`).
AddOutcome = Literal["added", "duplicate", "replaced", "similar"]
ADDED: AddOutcome = "added"
DUPLICATE: AddOutcome = "duplicate"
REPLACED: AddOutcome = "replaced"
SIMILAR: AddOutcome = "similar"
ADD_OUTCOMES: tuple[AddOutcome, ...] = (ADDED, DUPLICATE, REPLACED, SIMILAR)

#: What an add does with a memory that stored memories say nearly the same as:
#: ``"keep"`` (store it beside them), ``"skip"`` (store nothing; the most similar
#: stored memory's id is returned) or ``"supersede"`` (store it as superseding the most
#: similar one, as ``supersedes=`` does).
OnSimilar = Literal["keep", "skip", "supersede"]
ON_SIMILAR: tuple[OnSimilar, ...] = ("keep", "skip", "supersede")


class SimilarMemory(NamedTuple):
    """A stored memory that says nearly what an added one says: its ``id`` and the
    cosine ``similarity`` of the two memories' vectors."""

    id: str
    similarity: float


class AddResult(str):
    """The id :meth:`HybridMemory.add` stored or found, and what it did.

    It is the id itself (a ``str``: compare it, store it, pass it back as an id), with
    ``outcome`` saying what happened: ``"added"``, ``"duplicate"`` (the text was stored
    already with the same metadata: nothing was written and this is the existing
    memory's id), ``"replaced"`` (``upsert=True`` over an existing id) or ``"similar"``
    (memories of the store or namespace say nearly the same thing)::

        first = memory.add("Alice prefers dark mode")
        again = memory.add("Alice prefers dark mode")
        first.outcome, again.outcome, again == first      # ("added", "duplicate", True)

    ``similar`` names those memories, most similar first (each a :class:`SimilarMemory`:
    id and cosine similarity), and ``stored`` says whether this call wrote the memory.
    For a ``"similar"`` outcome both depend on the add's ``on_similar``: ``"keep"`` (the
    default) stored it beside them (the id is the new memory's), ``"supersede"`` stored it
    as superseding ``similar[0]``, ``"skip"`` stored nothing and the id is
    ``similar[0].id``::

        told = memory.add("Alice prefers dark mode (confirmed again)")
        told.outcome, told.similar[0].id == first         # ("similar", True)
    """

    outcome: AddOutcome
    similar: tuple[SimilarMemory, ...]
    stored: bool

    def __new__(
        cls,
        memory_id: str,
        outcome: AddOutcome,
        similar: Iterable[SimilarMemory | tuple[str, float]] = (),
        *,
        stored: bool | None = None,
    ) -> AddResult:
        """The id ``memory_id`` with the ``outcome`` of the add that returned it, the
        ``similar`` memories it found and whether it ``stored`` the memory (by default:
        stored when added or replaced)."""
        if outcome not in ADD_OUTCOMES:
            raise ValueError(f"outcome: expected one of {', '.join(ADD_OUTCOMES)}, not {outcome!r}")
        result = super().__new__(cls, memory_id)
        result.outcome = outcome
        result.similar = tuple(SimilarMemory(str(i), float(s)) for i, s in similar)
        result.stored = outcome in (ADDED, REPLACED) if stored is None else bool(stored)
        return result

    @property
    def id(self) -> str:
        """The memory's id as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        # ``stored`` goes back in as state (the instance's dict): a keyword argument
        # cannot be passed through a pickle's constructor call.
        return (type(self), (self.id, self.outcome, self.similar), {"stored": self.stored})


class WriteReport(list[str]):
    """The ids :meth:`HybridMemory.add_many` stored or found, in the order of the items,
    and what it did with each.

    It is the list of ids (one per item, as ever; typed ``list[str]``, so code that took
    the ids keeps type-checking). ``results`` holds the same ids as :class:`AddResult`
    values, whose ``outcome`` tells each item's fate; ``added``, ``duplicates``,
    ``replaced`` and ``similar`` gather the ids by outcome (each id once, in order of
    first appearance) and ``written`` counts the memories the call wrote::

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
        """The ids of the new memories this call wrote that no stored memory says nearly
        the same as (those that one does are in :attr:`similar`)."""
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
    def similar(self) -> tuple[str, ...]:
        """The ids returned for items that stored memories say nearly the same as: the
        new memories' ids when the call kept or superseded, the stored ones' when it
        skipped (each result's ``similar`` names the memories found)."""
        return self._ids(SIMILAR)

    @property
    def written(self) -> int:
        """How many memories this call wrote (added, replaced, or similar and stored)."""
        return len({r.id for r in self._results if r.stored})

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
