"""The stored memories that say nearly what memories being added say: the write-time
report (``AddResult.similar``, outcome ``"similar"``) and what ``on_similar`` does with
them.

Found from the vectors the write computed already (nothing is embedded again): one
Chroma call per batch for each new memory's nearest stored memories of the same store
or namespace (a query; for a namespace of few memories, a read of them all, compared
here; Chroma's answer either way, so another process's or another server client's
writes count at once), and the earlier memories of the same batch compared with each other
(the earlier batches of a call are stored by then, and found by the query). Which of
them are near-duplicates is :class:`~hybrid_memory._model.near_duplicates.NearDuplicateRule`'s
call, from their cosine and their words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hybrid_memory._embedding.vectors import Matrix, nearest_by_cosine
from hybrid_memory._keyword.bm25 import STOPWORDS, query_words
from hybrid_memory._model.near_duplicates import NearDuplicateRule, comparable_words
from hybrid_memory._model.records import SUPERSEDES_KEY, NewMemory, content_hash
from hybrid_memory._model.write_outcomes import (
    ADDED,
    SIMILAR,
    AddResult,
    OnSimilar,
    SimilarMemory,
)
from hybrid_memory._store.collection import ChromaCollection

#: How many of its nearest stored memories each new memory is compared with (and the
#: most it reports).
NEAREST = 5
# Rows of a batch compared with the earlier ones at a time (a 512 x 5,000 block of
# cosines is 10 MB).
_BLOCK = 512


@dataclass(frozen=True, slots=True)
class Finding:
    """What a write found for one new memory: the ``similar`` memories, most similar
    first, and whether it ``stored`` the new one (``on_similar`` ``"skip"`` did not)."""

    similar: tuple[SimilarMemory, ...]
    stored: bool


class SimilarCheck:
    """One add's look for near-duplicates (``rule``) and what it does with them
    (``on_similar``); ``found`` gathers, by new memory id, what each batch found."""

    def __init__(self, rule: NearDuplicateRule, on_similar: OnSimilar) -> None:
        self.rule = rule
        self.on_similar = on_similar
        self.found: dict[str, Finding] = {}

    def check(
        self,
        collection: ChromaCollection,
        batch: Sequence[tuple[str, NewMemory]],
        vectors: npt.NDArray[Any],
        existing: Mapping[str, Any],
    ) -> tuple[list[tuple[str, NewMemory]], npt.NDArray[Any]]:
        """One batch about to be written (``(id, memory)`` pairs, their ``vectors``): the
        batch and vectors to write. New memories with similar ones are noted in
        :attr:`found` (those whose id is ``existing`` are replacements, not looked at);
        skipped ones leave the batch; superseding ones carry the link to their most
        similar memory (unless they name one themselves)."""
        new = [position for position, (i, _) in enumerate(batch) if i not in existing]
        if not new:
            return list(batch), vectors
        skipping = self.on_similar == "skip"
        found = find_similar(
            collection,
            [batch[p][0] for p in new],
            [batch[p][1].text for p in new],
            vectors[new],
            self.rule,
            skipping=skipping,
        )
        kept = list(batch)
        dropped: set[int] = set()
        for position, similar in zip(new, found, strict=True):
            if not similar:
                continue
            memory_id, memory = batch[position]
            self.found[memory_id] = Finding(similar, stored=not skipping)
            if skipping:
                dropped.add(position)
            elif self.on_similar == "supersede" and SUPERSEDES_KEY not in memory.metadata:
                kept[position] = (memory_id, _superseding(memory, similar[0].id))
        if dropped:
            rows = [p for p in range(len(batch)) if p not in dropped]
            return [kept[p] for p in rows], vectors[rows]
        return kept, vectors

    def told(self, results: Sequence[AddResult]) -> list[AddResult]:
        """The results of the add, told what was found: a new memory with similar ones
        is ``"similar"``; one skipped hands back its most similar memory's id, and so
        does every other result of the call that named it (a repeat of it in the call)."""
        out: list[AddResult] = []
        for result in results:
            finding = self.found.get(result.id)
            if finding is None:
                out.append(result)
            elif not finding.stored:
                similar = finding.similar
                out.append(AddResult(similar[0].id, SIMILAR, similar, stored=False))
            elif result.outcome == ADDED:
                out.append(AddResult(result.id, SIMILAR, finding.similar, stored=True))
            else:
                out.append(result)
        return out


def _superseding(memory: NewMemory, target: str) -> NewMemory:
    """``memory`` with a link to the memory it supersedes (its content hash follows its
    metadata, as the index computes it when it reads the collection)."""
    metadata = {**memory.metadata, SUPERSEDES_KEY: target}
    return dataclasses.replace(
        memory, metadata=metadata, content_hash=content_hash(memory.text, metadata)
    )


def find_similar(
    collection: ChromaCollection,
    ids: Sequence[str],
    texts: Sequence[str],
    vectors: npt.ArrayLike,
    rule: NearDuplicateRule,
    *,
    skipping: bool,
    nearest: int = NEAREST,
) -> list[tuple[SimilarMemory, ...]]:
    """For each new memory of a batch (``ids``, ``texts``, one row of ``vectors`` each),
    the memories that say nearly the same thing, most similar first: stored ones (of the
    collection, which is the store's or a namespace's) and earlier ones of the batch.
    With ``skipping``, an earlier memory of the batch that has similar ones itself (it
    will not be stored) is not among them. ``nearest``: how many stored memories each is
    compared with."""
    if not ids:
        return []
    matrix = np.asarray(vectors, dtype=np.float64).reshape(len(ids), -1)
    norms = np.linalg.norm(matrix, axis=1)
    units = np.divide(matrix, norms[:, None], out=np.zeros_like(matrix), where=norms[:, None] > 0)
    words = [_words(text) for text in texts]
    got = _nearest_stored(collection, np.asarray(vectors, dtype=np.float32), nearest)
    found: list[tuple[SimilarMemory, ...]] = []
    for row, memory_id in enumerate(ids):
        near: dict[str, float] = {}
        for stored, distance, document in zip(
            got["ids"][row], got["distances"][row], got["documents"][row], strict=True
        ):
            cosine = 1.0 - float(distance)
            if stored != memory_id and rule.holds(cosine, words[row], _words(document or "")):
                near[stored] = cosine
        near.update(_earlier(row, units, words, rule, found, ids, skipping))
        found.append(tuple(SimilarMemory(i, c) for i, c in sorted(near.items(), key=_nearest)))
    return found


def _nearest_stored(collection: ChromaCollection, vectors: Matrix, n: int) -> dict[str, Any]:
    """Each row's ``n`` nearest stored memories, as a Chroma query answers (ids, cosine
    distances, documents, one list per row), in one Chroma call. A namespace's memories,
    when they are few, are read and compared one by one (as its searches do: Chroma's
    query narrowed to a namespace scans the shared collection; its read does not)."""
    if collection.partition is not None:
        got = collection.call(
            "get", limit=collection.compare_all + 1, include=["embeddings", "documents"]
        )
        if len(got["ids"]) <= collection.compare_all:
            ids, documents, stored = got["ids"], got["documents"], got["embeddings"]
            near = [nearest_by_cosine(stored, row, n) if len(ids) else [] for row in vectors]
            return {
                "ids": [[ids[i] for i, _ in rows] for rows in near],
                "distances": [[1.0 - c for _, c in rows] for rows in near],
                "documents": [[documents[i] for i, _ in rows] for rows in near],
            }
    return dict(
        collection.call(
            "query", query_embeddings=vectors, n_results=n, include=["distances", "documents"]
        )
    )


def _earlier(
    row: int,
    units: npt.NDArray[np.float64],
    words: Sequence[frozenset[str]],
    rule: NearDuplicateRule,
    found: Sequence[tuple[SimilarMemory, ...]],
    ids: Sequence[str],
    skipping: bool,
) -> dict[str, float]:
    """The memories of the batch before ``row`` that say nearly what it says (by id)."""
    out: dict[str, float] = {}
    for start in range(0, row, _BLOCK):
        cosines = units[start : min(row, start + _BLOCK)] @ units[row]
        for offset in np.flatnonzero(cosines >= rule.floor).tolist():
            earlier = start + offset
            if skipping and found[earlier]:
                continue  # not stored: it has similar memories itself
            if ids[earlier] != ids[row] and rule.holds(
                float(cosines[offset]), words[row], words[earlier]
            ):
                out[ids[earlier]] = float(cosines[offset])
    return out


def _words(text: str) -> frozenset[str]:
    return comparable_words(query_words(text, drop_stopwords=False), STOPWORDS)


def _nearest(pair: tuple[str, float]) -> tuple[float, str]:
    return (-pair[1], pair[0])


def similar_to(
    collection: ChromaCollection,
    memory_id: str,
    text: str,
    vector: npt.ArrayLike,
    rule: NearDuplicateRule,
    nearest: int,
) -> tuple[SimilarMemory, ...]:
    """The stored memories that say nearly what the stored memory ``memory_id`` (its
    ``text`` and ``vector``) says, most similar first, among its ``nearest``."""
    matrix = np.asarray(vector, dtype=np.float32).reshape(1, -1)
    found = find_similar(
        collection, [memory_id], [text], matrix, rule, skipping=False, nearest=nearest + 1
    )
    return found[0]
