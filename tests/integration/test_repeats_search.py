"""Recall without repeats, with the real default model (all-MiniLM-L6-v2): a fact said
several times comes back as one hit naming the others, maximal marginal relevance
brings variety, and a name every memory carries adds nothing to a hit's score (the
walk's case: one namespace of memories about Alice)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hybrid_memory import HybridMemory, InvalidInputError

pytestmark = pytest.mark.slow

PEANUTS = [
    "Alice is allergic to peanuts",
    "Alice is allergic to peanuts (confirmed again)",
    "Alice is allergic to peanuts, per the chat on 2026-10-13.",
    "2026-11-02: Alice is allergic to peanuts",
]
BIRTHDAY = [
    "Alice's birthday is on the 3rd of May",
    "Alice's birthday is on the 3rd of May (confirmed again)",
    "2026-09-30: Alice's birthday is on the 3rd of May",
]
DRINKS = ["Alice drinks oat milk lattes every morning", "Alice drinks green tea after lunch"]
OTHERS = [
    "Alice works as a nurse at the city hospital",
    "Alice has two cats called Miso and Tofu",
    "Alice moved to Lyon in 2024",
    "Alice plays the cello in an amateur orchestra",
    "Alice goes hiking in the Alps every summer",
    "Alice prefers dark mode in every editor",
    "Alice is learning Japanese on weekends",
    "Alice's brother Tom lives in Montreal",
    "Alice runs a half marathon every spring",
    "Alice volunteers at the animal shelter on Saturdays",
    "Alice reads mystery novels before bed",
    "Alice's favourite colour is teal",
    "Alice drives an old green Volvo",
    "Alice bakes sourdough bread on Sundays",
    "Alice keeps a vegetable garden on her balcony",
    "Alice studied chemistry at university",
    "Alice is saving for a trip to Patagonia",
    "Alice collects vintage postcards",
    "Alice's phone number ends in 4471",
    "Alice takes the 7:40 train to work",
    "Alice's dentist appointment is on Friday",
    "Alice wants to adopt a dog next year",
    "Alice is afraid of heights",
    "Alice prefers window seats on planes",
    "Alice's daughter starts school in September",
    "Alice plays chess online in the evenings",
    "Alice knits scarves for her friends",
    "Alice is vegetarian since 2019",
    "Alice listens to jazz while cooking",
    "Alice's passport expires in March",
    "Alice fixed her own bicycle last week",
    "Alice does yoga three times a week",
    "Alice is planning a surprise party for Tom",
]


@pytest.fixture(scope="module")
def alice() -> Iterator[HybridMemory]:
    """The walk's case: one namespace, every memory about Alice (43 here), the peanut
    fact said four times and the birthday three, each restatement stored later."""
    with HybridMemory() as store:
        view = store.namespace("alice")
        for text in [*PEANUTS[:1], *BIRTHDAY[:1], *DRINKS, *OTHERS, *PEANUTS[1:], *BIRTHDAY[1:]]:
            view.add(text)
        assert view.count() == 42
        yield view


def test_a_memory_sharing_only_the_name_scores_below_0_3(alice: HybridMemory) -> None:
    hits = alice.search("what does alice drink", k=10)
    assert {h.text for h in hits[:2]} == set(DRINKS)
    assert all(h.score > 0.5 for h in hits[:2])
    assert all(h.score < 0.3 for h in hits[2:])  # they share "alice" and nothing else
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


def test_a_query_of_the_crowd_word_alone_keeps_it(alice: HybridMemory) -> None:
    # "alice" is all it asks for: every memory has it, and every one is relevant.
    assert all(h.score >= 0.3 for h in alice.search("alice", k=5))


def test_a_fact_said_four_times_comes_back_once(alice: HybridMemory) -> None:
    hits = alice.search("what is alice allergic to?", k=10)
    peanut_hits = [h for h in hits if "peanuts" in h.text]
    assert len(peanut_hits) == 1
    hit = peanut_hits[0]
    # The best ranked stands for them: the one the search shows first without the folding.
    unfolded = alice.with_settings(collapse_similar=False).search(
        "what is alice allergic to?", k=10
    )
    assert hit.id == next(h.id for h in unfolded if "peanuts" in h.text)
    assert {hit.id, *hit.similar_ids} == {m.id for m in alice.list_memories() if m.text in PEANUTS}
    assert len({h.text for h in hits}) == len(hits)
    assert not any("birthday" in h.text for h in hits[1:]) or all(
        h.text in (BIRTHDAY[-1],) for h in hits if "birthday" in h.text
    )


def test_collapse_off_shows_every_repeat(alice: HybridMemory) -> None:
    hits = alice.with_settings(collapse_similar=False).search("what is alice allergic to?", k=10)
    assert sum("peanuts" in h.text for h in hits) == 4
    assert all(h.similar_ids == () for h in hits)


def test_the_superseding_memory_stands_for_its_repeats() -> None:
    with HybridMemory() as memory:
        old = memory.add("Alice lives in Paris, in the 11th arrondissement")
        memory.add("Bob lives in Berlin")
        newer = memory.add(
            "Alice lives in Paris, in the 11th arrondissement (confirmed again)",
            on_similar="supersede",
        )
        assert memory.get(newer).supersedes == old
        hit = memory.search("where does alice live", k=3)[0]
        assert (hit.id, hit.similar_ids, hit.superseded_by) == (newer, (old,), None)


def test_mmr_trades_relevance_for_variety(alice: HybridMemory) -> None:
    plain = alice.with_settings(collapse_similar=False).search("alice peanuts allergy", k=4)
    varied = alice.with_settings(collapse_similar=False).search(
        "alice peanuts allergy", k=4, mmr=0.7
    )
    assert sum("peanuts" in h.text for h in plain) == 4
    assert sum("peanuts" in h.text for h in varied) == 1
    assert varied[0].id == plain[0].id  # the best hit first either way
    by_setting = alice.with_settings(collapse_similar=False, mmr=0.7)
    assert [h.id for h in by_setting.search("alice peanuts allergy", k=4)] == [h.id for h in varied]
    with pytest.raises(InvalidInputError, match="mmr"):
        alice.search("alice", mmr=2)
