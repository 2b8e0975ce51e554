"""HybridMemoryBlock without repeats: a fact the user said several times is recalled
once (the store folds near-duplicates, as LlamaIndex's fact block keeps facts
distinct), ``mmr`` asks the recall for variety, and ``on_similar`` chooses what storing
a repeat does."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.memory.hybrid_memory import HybridMemoryBlock

from hybrid_memory import HybridMemory, InvalidInputError

pytestmark = pytest.mark.slow  # the real embedding model

SAID = [
    "I am allergic to peanuts",
    "I am allergic to peanuts (confirmed again)",
    "2026-10-13: I am allergic to peanuts",
    "My sister lives in Lyon",
]


def msg(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def flush_each(block: HybridMemoryBlock, session: str) -> None:
    for text in SAID:  # one flush each: each its own moment, the newest last
        await block.aput([msg(text)], from_short_term_memory=True, session_id=session)


async def test_a_fact_said_three_times_is_recalled_once(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, k=3)
    await flush_each(block, "s1")
    assert store.count() == 4
    recalled = await block.aget([msg("what am I allergic to?")], session_id="s1")
    lines = recalled.splitlines()
    assert sum("peanuts" in line for line in lines) == 1
    best = store.with_settings(collapse_similar=False).search("what am I allergic to?", k=10)
    assert next(h.text for h in best if "peanuts" in h.text) in recalled  # the best ranked
    assert any("Lyon" in line for line in lines)


async def test_on_similar_skip_stores_a_repeat_once(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, on_similar="skip")
    await flush_each(block, "s1")
    # The first says it; the two restatements are skipped; the sister is new.
    assert sorted(m.text for m in store.list_memories()) == [SAID[0], SAID[3]]


async def test_mmr_asks_the_recall_for_variety(store: HybridMemory, minilm: Any) -> None:
    plain = HybridMemoryBlock(memory=store.with_settings(collapse_similar=False), k=2)
    await flush_each(plain, "s1")
    question = [msg("peanuts allergy")]
    assert (
        sum("peanuts" in x for x in (await plain.aget(question, session_id="s1")).splitlines()) == 2
    )
    varied = HybridMemoryBlock(memory=store.with_settings(collapse_similar=False), k=2, mmr=0.8)
    lines = (await varied.aget(question, session_id="s1")).splitlines()
    assert sum("peanuts" in x for x in lines) == 1 and any("Lyon" in x for x in lines)
    with pytest.raises(InvalidInputError):
        HybridMemoryBlock(memory=store, mmr=2.0)
