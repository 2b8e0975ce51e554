"""The hits a search shows when near-duplicates collapse and when maximal marginal
relevance asks for variety: one hit per group of memories that say nearly the same
thing, the others named on it, so nothing is hidden.

Groups are formed down the fused order: a candidate joins the first group holding a
memory it is a near-duplicate of
(:class:`~hybrid_memory._model.near_duplicates.NearDuplicateRule`, from the vectors and
texts the store holds for the candidates: nothing is embedded again), else it leads a
new group, until one more group than needed would start. (Any member, not only the
leader: two restatements of one fact, each with its own date in front, are not
near-duplicates of each other, but both are of the fact.) A group takes its leader's
place and fused score; the memory shown for it is the best ranked of those no other
member supersedes (what the search would have shown there without the collapse), and
the others are its ``similar_ids``, in fused order. A candidate without a stored vector
is a group alone.

With ``mmr`` (a diversity weight), more groups are formed (``fetch``, as LangChain's
``fetch_k``) and :func:`~hybrid_memory._search.mmr.mmr_order` chooses ``k`` of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword.bm25 import STOPWORDS, query_words
from hybrid_memory._model.near_duplicates import NearDuplicateRule, comparable_words
from hybrid_memory._model.results import Hit, Memory
from hybrid_memory._search.mmr import mmr_order


class Candidates(Protocol):
    """Where the candidates are read from (the searcher)."""

    def memories(self, ordered: Sequence[str], k: int) -> list[Memory]:
        """The first ``k`` memories of ``ordered`` that exist, in order."""
        ...

    def vectors(self, ids: list[str]) -> Mapping[str, npt.ArrayLike]:
        """The stored vectors of those of ``ids`` that have one, by id."""
        ...


class VectorSource(Protocol):
    """Candidates whose vectors can be read reusing some read already (the searcher)."""

    def memories(self, ordered: Sequence[str], k: int) -> list[Memory]: ...

    def vectors(
        self, ids: list[str], known: Mapping[str, npt.NDArray[np.float64]] | None = None
    ) -> Mapping[str, npt.ArrayLike]: ...


class ReusingVectors:
    """:class:`Candidates` from ``source`` with the vectors its search read already
    (``known``: a small namespace's, the feedback memories'), read again for none."""

    def __init__(self, source: VectorSource, known: Mapping[str, npt.NDArray[np.float64]]):
        self._source, self._known = source, known

    def memories(self, ordered: Sequence[str], k: int) -> list[Memory]:
        return self._source.memories(ordered, k)

    def vectors(self, ids: list[str]) -> Mapping[str, npt.ArrayLike]:
        return self._source.vectors(ids, self._known)


# Groups MMR chooses from: as LangChain's fetch_k, at least 20 and four per hit.
_FETCH_LEAST = 20
_FETCH_PER_HIT = 4


@dataclass
class Group:
    """Memories that say nearly the same thing: ``members`` in fused order (the first
    is the leader), with the leader's vector (unit length; None: it has none)."""

    members: list[Memory]
    unit: npt.NDArray[np.float64] | None

    @property
    def leader(self) -> Memory:
        return self.members[0]


@dataclass(frozen=True)
class Chosen:
    """The memories to show, in order, and for each shown id the group it stands for
    (its member ids, fused order, itself included)."""

    memories: list[Memory]
    groups: dict[str, tuple[str, ...]]

    def similar_ids(self, memory_id: str) -> tuple[str, ...]:
        """The ids collapsed into the hit ``memory_id`` (itself left out)."""
        return tuple(i for i in self.groups.get(memory_id, ()) if i != memory_id)

    def best(self, values: Mapping[str, float]) -> dict[str, float]:
        """``values`` (by id) with each shown id's value raised to its group's best."""
        out = dict(values)
        for shown, members in self.groups.items():
            known = [values[i] for i in members if i in values]
            if known:
                out[shown] = max(known)
        return out


def choose(
    ordered: Sequence[str],
    fused: Mapping[str, float],
    k: int,
    candidates: Candidates,
    rule: NearDuplicateRule | None,
    diversity: float,
    superseded: Mapping[str, str] | None,
) -> Chosen:
    """The hits for the candidates ``ordered`` (best ``fused`` score first): ``k`` groups,
    collapsed by ``rule`` (None: every candidate alone) and, with a ``diversity`` weight
    above 0, chosen by maximal marginal relevance among more of them (each group's
    relevance its leader's fused score). ``superseded`` maps an id to the newest memory
    superseding it."""
    if rule is None and diversity <= 0:
        return Chosen(candidates.memories(ordered, k), {})
    wanted = max(_FETCH_LEAST, _FETCH_PER_HIT * k) if diversity > 0 else k

    def read(ids: list[str]) -> tuple[list[Memory], Mapping[str, npt.ArrayLike]]:
        found = candidates.memories(ids, len(ids))
        return found, candidates.vectors([m.id for m in found])

    groups = _grouped(ordered, wanted, read, rule)
    if diversity > 0 and len(groups) > 1:
        relevance = [fused.get(g.leader.id, 0.0) for g in groups]
        dimension = next((len(g.unit) for g in groups if g.unit is not None), 1)
        units = np.asarray([g.unit if g.unit is not None else np.zeros(dimension) for g in groups])
        groups = [groups[i] for i in mmr_order(relevance, units, k, diversity)]
    else:
        groups = groups[:k]
    shown = [_shown(g, superseded or {}) for g in groups]
    return Chosen(
        memories=shown,
        groups={m.id: tuple(x.id for x in g.members) for m, g in zip(shown, groups, strict=True)},
    )


_Reader = Callable[[list[str]], tuple[list[Memory], Mapping[str, npt.ArrayLike]]]


def _grouped(
    ordered: Sequence[str], wanted: int, read: _Reader, rule: NearDuplicateRule | None
) -> list[Group]:
    """Up to ``wanted`` groups, formed down ``ordered`` until one more would start."""
    groups: list[Group] = []
    units: list[npt.NDArray[np.float64]] = []  # every member's unit vector that exists
    owners: list[tuple[Group, frozenset[str]]] = []  # the group and words of each of them
    for memory, vector in _candidates(ordered, wanted, read):
        unit = _unit(vector)
        words = comparable_words(query_words(memory.text, drop_stopwords=False), STOPWORDS)
        home = None
        if rule is not None and unit is not None and units:
            cosines = np.asarray(units) @ unit
            for position in np.flatnonzero(cosines >= rule.floor).tolist():
                group, their_words = owners[position]
                if rule.holds(float(cosines[position]), words, their_words):
                    home = group
                    break
        if home is None:
            if len(groups) == wanted:
                break
            home = Group([], unit)
            groups.append(home)
        home.members.append(memory)
        if unit is not None:
            units.append(unit)
            owners.append((home, words))
    return groups


def _candidates(
    ordered: Sequence[str], wanted: int, read: _Reader
) -> Iterator[tuple[Memory, npt.ArrayLike | None]]:
    """The candidates that exist, in order, each with its stored vector (None: none),
    read a batch at a time: twice what is wanted first, then more."""
    start, step = 0, max(2 * wanted, 8)
    while start < len(ordered):
        memories, vectors = read(list(ordered[start : start + step]))
        for memory in memories:
            yield memory, vectors.get(memory.id)
        start += step
        step *= 2


def _unit(vector: npt.ArrayLike | None) -> npt.NDArray[np.float64] | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float64).ravel()
    length = float(np.linalg.norm(array))
    return array / length if np.isfinite(length) and length > 0 else None


def _shown(group: Group, superseded: Mapping[str, str]) -> Memory:
    """The member that stands for ``group``: the best ranked of those no other member
    supersedes. The best ranked rather than the newest: it is the one that answers the
    question, and a group of restatements says the same thing at every date."""
    ids = {m.id for m in group.members}
    current = [m for m in group.members if superseded.get(m.id) not in ids] or group.members
    return current[0]


def as_hits(
    memories: list[Memory],
    relevance: Sequence[float],
    fused: Mapping[str, float],
    rankings: Mapping[str, list[str]],
    scores: Mapping[str, Mapping[str, float]],
    superseded: Mapping[str, str],
    picked: Chosen,
) -> list[Hit]:
    """The hits, each with its relevance, fused score, every leg's rank and score, the
    memory that supersedes it (if any) and those collapsed into it."""
    shown = {m.id for m in memories}
    positions = {
        leg: {i: r for r, i in enumerate(ids, start=1) if i in shown}
        for leg, ids in rankings.items()
    }
    hits: list[Hit] = []
    for memory, score in zip(memories, relevance, strict=True):
        ranks = {leg: p[memory.id] for leg, p in positions.items() if memory.id in p}
        leg_scores = {leg: scores[leg][memory.id] for leg in ranks}
        hits.append(
            Hit(
                memory,
                score,
                ranks,
                leg_scores,
                fused_score=fused[memory.id],
                superseded_by=superseded.get(memory.id),
                similar_ids=picked.similar_ids(memory.id),
            )
        )
    return hits
