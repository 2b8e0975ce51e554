"""Long-term memory for a LlamaIndex chat: HybridMemoryBlock in a ``Memory``.

A ``Memory`` with a small token limit keeps only the latest turns; older ones are
flushed into the hybrid-memory store by the block, and recalled into the prompt when
they match what is being said. The store is on disk, so a new session (or process)
recalls them too.

Runs offline as written: the bundled default embedding model (all-MiniLM-L6-v2) embeds
the memories, and LlamaIndex's MockLLM stands in for the LLM. ``MockLLM(max_tokens=5)``
answers "text text ..."; ``MockLLM()`` echoes its prompt, which shows what a real LLM
would have been given. Pass a real LLM (OpenAI, Ollama, ...) to get real answers.

    pip install -e ./integrations/llama_index
    python examples/llama_index_memory.py
"""

from __future__ import annotations

import re
import tempfile

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.memory.hybrid_memory import HybridMemoryBlock

from hybrid_memory import HybridMemory

TURNS = [
    "Hi! My cat is called Miso and she is orange.",
    "I work as a nurse at the city hospital, mostly night shifts.",
    "My favourite food is ramen with extra garlic.",
    "We are planning a trip to Lisbon next spring.",
    "I started learning the cello last month.",
]
QUESTION = "What is my cat called, and what does she look like?"


def memory_for(block: HybridMemoryBlock, session: str) -> Memory:
    # 100 tokens in all, at most 70 of them chat history: early turns are flushed fast.
    return Memory.from_defaults(
        session_id=session, token_limit=100, token_flush_size=30, memory_blocks=[block]
    )


def recalled(prompt: str) -> str:
    found = re.search(r"<recalled_memories>\n(.*?)\n</recalled_memories>", prompt, re.DOTALL)
    return found.group(1) if found else "(nothing recalled)"


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        # Session 1: chat until the first turn has left the short-term queue.
        with HybridMemory(path=directory) as store:
            block = HybridMemoryBlock(memory=store, scope="user", user_id="alice", max_tokens=60)
            memory = memory_for(block, "alice-1")
            chat = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=memory)
            for turn in TURNS:
                chat.chat(turn)
            short_term = [m.content for m in memory.get_all(status=MessageStatus.ACTIVE)]
            print(f"Short-term memory now holds {len(short_term)} messages, from:")
            print(f"  {short_term[0]!r}")
            print(f"Stored in hybrid-memory: {store.count()} memories\n")

            echo = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
            prompt = echo.chat(QUESTION).response
            print(f"Session 1, asked {QUESTION!r}; recalled into the prompt:")
            print(recalled(prompt), "\n")

        # Session 2: the store reopened from disk, a new Memory with an empty queue.
        with HybridMemory(path=directory) as store:
            block = HybridMemoryBlock(memory=store, scope="user", user_id="alice", max_tokens=60)
            echo = SimpleChatEngine.from_defaults(
                llm=MockLLM(), memory=memory_for(block, "alice-2")
            )
            prompt = echo.chat(QUESTION).response
            print("Session 2 (store reopened from disk), the full prompt the LLM was given:")
            print(prompt)
            if "Miso" not in recalled(prompt):
                raise SystemExit("the fact about Miso was not recalled")


if __name__ == "__main__":
    main()
