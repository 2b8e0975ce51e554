"""Supersession: a newer memory that replaces an older one ("moved to Berlin" after
"lives in Paris"), and what a search does with the older one.

The link is the newer memory's metadata key ``supersedes`` (the older memory's id),
set by ``add(..., supersedes=ID)``, an ``add_many`` item's ``supersedes``,
``update(id, supersedes=ID)`` or that metadata key itself. It lives in the Chroma
record like any metadata (the source of truth), so every process sharing the store
sees it, and the keyword index keeps it where filters look (an indexed reverse lookup
at search time). Deleting the newer memory removes the link with it: the older one
ranks as before.

At search time a superseded candidate is never dropped or filtered out: the memory that
supersedes it takes its place (raised to its score, or brought in when the search did
not retrieve it and its filter admits it) and it goes just below, its score times
``supersede_factor`` (A <- B <- C ends C, B, A where A ranked). So the newest statement
of a thing comes first and the history stays next to it. (Scaling the older score
alone, 0.5, pushed it out of the top 10 and left a correction the question's words
match worse where it was: LongMemEval's knowledge-update nDCG@10 0.589 -> 0.309 with
every old/new pair linked; this way, 0.636: docs/quality-study.md.) Its hit says which
memory replaced it (``Hit.superseded_by``).

Nothing here guesses a link: LongMemEval's knowledge-update judgments count the old
and the new value as evidence (docs/quality-study.md), so an automatic detector cannot
be shown safe on them, and none is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.records import SUPERSEDES_KEY
from hybrid_memory._store.collection import ChromaCollection

#: How far a chain is followed at search time (A <- B <- ... ); longer chains count as this.
MAX_CHAIN = 16

#: Finds, for some memory ids, the newest existing memory that supersedes each
#: (``{older id: newer id}``; ids nothing supersedes are left out).
SupersedingLookup = Callable[[Sequence[str]], Mapping[str, str]]


def chain_depths(
    ids: Sequence[str], lookup: SupersedingLookup
) -> tuple[dict[str, str], dict[str, int]]:
    """For the candidates ``ids`` and the memories superseding them: which memory
    supersedes each (``{older: newer}``) and how many newer memories stand above it in
    its chain (``{older: depth}``, >= 1).

    The chain is followed through memories that are not candidates too (a candidate
    A superseded by B, itself superseded by C, is two steps down even when B was not
    retrieved), at most ``MAX_CHAIN`` steps; a cycle (possible only by updates that
    made one) stops where it closes."""
    links = dict(lookup(list(ids)))
    direct = dict(links)
    frontier = [n for n in dict.fromkeys(direct.values()) if n not in links]
    for _ in range(MAX_CHAIN):
        if not frontier:
            break
        found = lookup(frontier)
        links.update(found)
        frontier = [n for n in dict.fromkeys(found.values()) if n not in links]
    depths: dict[str, int] = {}
    for older in links:
        depth, current, seen = 0, older, {older}
        while current in links and depth < MAX_CHAIN:
            current = links[current]
            depth += 1
            if current in seen:
                break
            seen.add(current)
        depths[older] = depth
    return links, depths


def demote_superseded(
    fused: dict[str, float],
    links: Mapping[str, str],
    depths: Mapping[str, int],
    factor: float,
    admissible: Callable[[list[str]], set[str]],
) -> None:
    """Newer first, nothing dropped: each superseded candidate's correction takes its
    place (the newer memory's score is raised to the older one's, and it joins the
    candidates when the search's filter admits it: ``admissible``), and the older one
    goes just below it, or lower when its score times ``factor`` per step of its chain
    is lower still. Deepest first, so a chain A <- B <- C ends C, B, A where A ranked.
    ``factor`` >= 1 changes nothing."""
    if factor >= 1.0:
        return
    olders = sorted(depths, key=lambda i: -depths[i])
    absent = [links[i] for i in olders if links[i] not in fused]
    allowed = admissible(list(dict.fromkeys(absent))) if absent else set()
    for older in olders:
        if older not in fused:
            continue
        score = fused[older]
        newer = links[older]
        demoted = score * factor ** depths[older]
        if newer in fused or newer in allowed:
            fused[newer] = max(fused.get(newer, 0.0), score)
            demoted = min(demoted, math.nextafter(fused[newer], -math.inf))
        fused[older] = demoted


def check_links(
    links: Iterable[tuple[str, str | None, str]],
    collection: ChromaCollection,
    written_with: Iterable[str] = (),
) -> None:
    """Refuse, before anything is written, a link to a memory that does not exist in
    this store (or namespace: a link never crosses one) or one that would close a cycle.

    ``links``: ``(field, id of the memory written or None, id it supersedes)``;
    ``collection``: the store's (asked, not the index, so another process's memories
    count at once); ``written_with``: ids written by the same call (an item may
    supersede another item of the call).
    """
    given = list(links)
    if not given:
        return
    same_call = set(written_with)
    found = collection.existing(list(dict.fromkeys(t for _, _, t in given if t not in same_call)))
    for field, _, target in given:
        if target not in found and target not in same_call:
            raise InvalidInputError(
                field,
                f"no memory with id {target!r} in this store; a memory can supersede only "
                "a stored memory of its own store or namespace",
            )
    for field, own, target in given:
        if own is None:
            continue
        current: str | None = target
        for _ in range(MAX_CHAIN):
            if current is None or current in same_call:
                break
            link = collection.metadata_by_id([current]).get(current, {}).get(SUPERSEDES_KEY)
            current = link if isinstance(link, str) else None
            if current == own:
                raise InvalidInputError(
                    field, f"{target!r} already supersedes {own!r}, directly or by a chain"
                )
