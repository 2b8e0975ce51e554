"""End to end: real LlamaIndex chat engines and agents with LlamaIndex's own fake LLMs, a
``Memory`` with a small token limit, and HybridMemoryBlock over a store on disk. A fact
said early leaves the short-term queue, is stored by the block, and is recalled into
the prompt later, also after the store is reopened from disk in a new Memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.core.tools import FunctionTool
from llama_index.memory.hybrid_memory import HybridMemoryBlock

from hybrid_memory import HybridMemory

pytestmark = pytest.mark.slow  # the real embedding model

FACT = "Hi! My cat is called Miso and she is orange."
SMALL_TALK = [
    "I work as a nurse at the city hospital, mostly night shifts.",
    "My favourite food is ramen with extra garlic.",
    "We are planning a trip to Lisbon next spring.",
    "The weather has been rainy all week long here.",
    "I started learning the cello last month.",
]
QUESTION = "What is my cat called?"
# The Memory puts block content in <memory><recalled_memories>...</recalled_memories>.
RECALLED = re.compile(r"<recalled_memories>\n(.*?)\n</recalled_memories>", re.DOTALL)


def memory_for(block: HybridMemoryBlock, session: str) -> Memory:
    # A small limit: the chat history may take 70% of 100 tokens, so the first turns are
    # flushed out of the short-term queue (and into the block) after a few turns.
    return Memory.from_defaults(
        session_id=session, token_limit=100, token_flush_size=30, memory_blocks=[block]
    )


def recalled_section(prompt: str) -> str:
    found = RECALLED.search(prompt)
    assert found, f"no recalled memories in the prompt:\n{prompt}"
    return found.group(1)


def active_texts(memory: Memory) -> list[str]:
    return [m.content or "" for m in memory.get_all(status=MessageStatus.ACTIVE)]


def test_chat_engine_recalls_an_early_fact_also_after_reopening(
    store_path: Path, minilm: Any
) -> None:
    store = HybridMemory(path=store_path, embedding=minilm)
    block = HybridMemoryBlock(memory=store, scope="user", user_id="alice", max_tokens=60)
    memory = memory_for(block, "alice-1")
    # MockLLM(max_tokens=n) answers "text text ..." (a short reply) ...
    chatty = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=memory)
    for turn in [FACT, *SMALL_TALK]:
        chatty.chat(turn)

    assert not any("Miso" in text for text in active_texts(memory)), "fact not flushed yet"
    assert store.count(filter={"user_id": "alice"}) >= 2

    # ... and MockLLM() echoes the prompt it was given, so the reply shows the prompt.
    echo = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    prompt = echo.chat(QUESTION).response
    assert "Miso" in recalled_section(prompt)
    assert re.search(r"- \[user, \d{4}-\d\d-\d\d \d\d:\d\d\] Hi! My cat is called Miso", prompt)
    assert prompt.rstrip().endswith(f"user: {QUESTION}\nassistant:")
    store.close()

    # A new process, in effect: the store reopened from disk, a new Memory with an empty
    # short-term queue in a new session. Only the block can know about Miso.
    with HybridMemory(path=store_path, embedding=minilm) as reopened:
        block = HybridMemoryBlock(memory=reopened, scope="user", user_id="alice")
        memory = memory_for(block, "alice-2")
        assert active_texts(memory) == []
        prompt = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory).chat(QUESTION)
        assert "Hi! My cat is called Miso" in recalled_section(prompt.response)

        # Another user's memory recalls none of it.
        other = HybridMemoryBlock(memory=reopened, scope="user", user_id="bob")
        reply = SimpleChatEngine.from_defaults(
            llm=MockLLM(), memory=memory_for(other, "bob-1")
        ).chat(QUESTION)
        assert "Miso" not in reply.response


async def test_async_chat_engine_recalls_within_its_session(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, max_tokens=60)
    memory = memory_for(block, "s1")
    chatty = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=memory)
    for turn in [FACT, *SMALL_TALK]:
        await chatty.achat(turn)
    assert not any("Miso" in text for text in active_texts(memory))

    echo = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    reply = await echo.achat(QUESTION)
    assert "My cat is called Miso" in recalled_section(reply.response)

    # Session scope: a new session of the same store starts with nothing recalled.
    fresh = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory_for(block, "s2"))
    assert "Miso" not in (await fresh.achat(QUESTION)).response


def check_the_weather() -> str:
    """Report today's weather."""
    return "Sunny, 21 degrees."


async def test_function_agent_gets_the_fact_in_its_prompt(store: HybridMemory) -> None:
    llm = MockFunctionCallingLLMWithChatMemoryOfLastCall()
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=check_the_weather)],
        llm=llm,
        system_prompt="You are a helpful assistant.",
    )
    block = HybridMemoryBlock(memory=store, max_tokens=60)
    memory = memory_for(block, "agent-1")
    for turn in [FACT, *SMALL_TALK]:
        await agent.run(user_msg=turn, memory=memory)
    assert not any("Miso" in text for text in active_texts(memory))

    await agent.run(user_msg=QUESTION, memory=memory)
    sent: list[ChatMessage] = list(llm.last_chat_messages or [])
    system = "\n".join(m.content or "" for m in sent if m.role == "system")
    assert "My cat is called Miso" in recalled_section(system)
    assert sent[-1].role in ("user", "tool")

    # The agent's tool traffic (tool-call-only assistant turns, tool results) was
    # flushed too, but only text from the user and the assistant was stored.
    stored = store.search("weather", k=50, alpha=1.0)
    assert stored and {h.metadata["role"] for h in stored} <= {"user", "assistant"}
    assert not any("Sunny, 21 degrees" in h.text for h in stored)


def test_chat_engine_with_store_immediately_recalls_in_the_next_session_at_once(
    store: HybridMemory,
) -> None:
    """No flush needed: each user turn is stored when the engine reads the Memory, and
    the model's replies ("text text ..." from MockLLM) are not stored unless asked."""
    block = HybridMemoryBlock(memory=store, scope="user", user_id="alice", store_immediately=True)
    roomy = Memory.from_defaults(session_id="alice-1", token_limit=50_000, memory_blocks=[block])
    chatty = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=roomy)
    chatty.chat(FACT)
    chatty.chat(SMALL_TALK[0])
    assert FACT in active_texts(roomy)  # still in the short-term queue: nothing flushed
    stored = {h.text for h in store.search("text", k=50, alpha=1.0)}
    assert stored == {FACT, SMALL_TALK[0]}

    later = Memory.from_defaults(session_id="alice-2", token_limit=50_000, memory_blocks=[block])
    prompt = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=later).chat(QUESTION).response
    assert FACT in recalled_section(prompt)
    assert "text text" not in recalled_section(prompt)

    # Asked for, the replies are stored too (each seen at the next turn's read).
    both = HybridMemoryBlock(
        memory=store,
        scope="user",
        user_id="bob",
        store_immediately=True,
        roles=["user", "assistant"],
    )
    bobs = Memory.from_defaults(session_id="bob-1", token_limit=50_000, memory_blocks=[both])
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=bobs)
    engine.chat("Hello there")
    engine.chat("How are you?")
    roles = {h.metadata["role"] for h in store.search("text", k=50, filter={"user_id": "bob"})}
    assert roles == {"user", "assistant"}
