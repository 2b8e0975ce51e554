"""The pure part of supersession: chains followed, scores demoted, nothing dropped."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hybrid_memory._search.supersession import (
    MAX_CHAIN,
    SupersedingLookup,
    chain_depths,
    demote_superseded,
)


def lookup_of(links: dict[str, str]) -> tuple[SupersedingLookup, list[list[str]]]:
    asked: list[list[str]] = []

    def lookup(ids: Sequence[str]) -> dict[str, str]:
        asked.append(list(ids))
        return {i: links[i] for i in ids if i in links}

    return lookup, asked


def test_chain_depths_follow_links_through_memories_that_are_not_candidates() -> None:
    lookup, _ = lookup_of({"a": "b", "b": "c"})
    links, depths = chain_depths(["a", "x"], lookup)
    assert links == {"a": "b", "b": "c"} and depths == {"a": 2, "b": 1}


def test_a_cycle_stops_where_it_closes() -> None:
    lookup, _ = lookup_of({"a": "b", "b": "a"})
    _, depths = chain_depths(["a", "b"], lookup)
    assert depths == {"a": 2, "b": 2}
    long = {f"m{i}": f"m{i + 1}" for i in range(40)}
    lookup, _ = lookup_of(long)
    assert chain_depths(["m0"], lookup)[1]["m0"] == MAX_CHAIN


def everything(ids: list[str]) -> set[str]:
    return set(ids)


def test_the_newer_takes_the_older_place_which_goes_just_below_nothing_dropped() -> None:
    fused = {"old": 0.03, "new": 0.01, "other": 0.02}
    demote_superseded(fused, {"old": "new"}, {"old": 1}, 0.99, everything)
    assert set(fused) == {"old", "new", "other"}
    assert fused["new"] == 0.03 and fused["other"] < fused["old"] < fused["new"]


def test_a_newer_memory_not_retrieved_is_brought_in_only_if_admitted() -> None:
    fused = {"old": 0.03, "other": 0.02}
    demote_superseded(fused, {"old": "new"}, {"old": 1}, 0.5, everything)
    assert fused["new"] == 0.03 and fused["old"] == pytest.approx(0.015)
    fused = {"old": 0.03, "other": 0.02}  # filtered out: not brought in, the factor alone
    demote_superseded(fused, {"old": "new"}, {"old": 2}, 0.5, lambda ids: set())
    assert fused == {"old": pytest.approx(0.03 * 0.25), "other": 0.02}


def test_factor_one_changes_nothing() -> None:
    fused = {"old": 0.03, "new": 0.01}
    demote_superseded(fused, {"old": "new"}, {"old": 1}, 1.0, everything)
    assert fused == {"old": 0.03, "new": 0.01}


def test_a_chain_ranks_newest_first_where_the_oldest_ranked() -> None:
    fused = {"a": 0.05, "b": 0.04, "x": 0.045}
    demote_superseded(fused, {"a": "b", "b": "c"}, {"a": 2, "b": 1}, 0.99, everything)
    order = sorted(fused, key=fused.__getitem__, reverse=True)
    assert order[:3] == ["c", "b", "a"] and fused["c"] == 0.05
