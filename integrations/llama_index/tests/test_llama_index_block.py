"""HybridMemoryBlock's contract as a LlamaIndex memory block, against a real store
(Chroma and SQLite in a temporary directory, the real default embedding model)."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory import Memory
from llama_index.core.utils import get_tokenizer
from llama_index.memory.hybrid_memory import DEFAULT_LINE_FORMAT, HybridMemoryBlock

from hybrid_memory import HybridMemory, InvalidInputError

pytestmark = pytest.mark.slow  # the real embedding model

LINE = re.compile(r"^- \[(user|assistant), \d{4}-\d\d-\d\d \d\d:\d\d\] \S")


def msg(role: str, text: str, **extra: Any) -> ChatMessage:
    return ChatMessage(role=role, content=text, additional_kwargs=extra)


async def flush(block: HybridMemoryBlock, session: str | None, *messages: ChatMessage) -> None:
    """What Memory does with the messages it pushes out of its short-term queue."""
    await block.aput(list(messages), from_short_term_memory=True, session_id=session)


def by_text(store: HybridMemory) -> dict[str, Any]:
    hits = store.search("anything at all", k=store.settings.max_k, alpha=1.0)
    found = {h.text: h.memory for h in hits}
    assert len(found) == store.count(), "every memory should be listed"
    return found


def tokens(text: str) -> int:
    return len(get_tokenizer()(text))


# --- storing -----------------------------------------------------------------------------


async def test_flushed_messages_are_stored_with_role_session_and_tags(store: HybridMemory) -> None:
    exchange = [msg("user", "My cat is called Miso"), msg("assistant", "Nice name!")]
    await flush(HybridMemoryBlock(memory=store), "s1", *exchange)
    # By default only what the user said: replies are the model's words, not facts.
    assert set(by_text(store)) == {"My cat is called Miso"}

    block = HybridMemoryBlock(memory=store, roles=["user", "assistant"])
    await flush(block, "s1", *exchange)
    stored = by_text(store)
    assert set(stored) == {"My cat is called Miso", "Nice name!"}
    user = stored["My cat is called Miso"]
    assert dict(user.metadata) == {"role": "user", "session_id": "s1", "source": "llama_index"}
    assert set(user.tags) == {"role:user", "session:s1"}
    assert stored["Nice name!"].metadata["role"] == "assistant"
    assert user.created_at is not None
    assert abs((datetime.now(timezone.utc) - user.created_at).total_seconds()) < 120


async def test_user_metadata_and_tags_are_added(store: HybridMemory) -> None:
    block = HybridMemoryBlock(
        memory=store, user_id="alice", metadata={"team": "infra"}, tags=["chat"]
    )
    await flush(block, "s1", msg("user", "The staging cluster is in Frankfurt"))
    (memory,) = by_text(store).values()
    assert memory.metadata["user_id"] == "alice"
    assert memory.metadata["team"] == "infra"
    assert set(memory.tags) == {"chat", "role:user", "session:s1", "user:alice"}


async def test_blank_system_tool_and_tool_call_only_messages_are_skipped(
    store: HybridMemory,
) -> None:
    block = HybridMemoryBlock(memory=store)
    tool_call = ChatMessage(
        role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="lookup")]
    )
    await flush(
        block,
        "s1",
        msg("system", "You are a helpful assistant"),
        msg("user", "   \n "),
        tool_call,
        msg("tool", '{"temperature": 21}'),
        msg("user", "Book the meeting room for Tuesday"),
    )
    assert set(by_text(store)) == {"Book the meeting room for Tuesday"}

    with_tools = HybridMemoryBlock(memory=store, roles=["user", "assistant", "tool"])
    await flush(with_tools, "s1", msg("tool", '{"temperature": 21}'))
    assert store.count() == 2


async def test_reflushing_the_same_message_stores_it_once(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, roles=["user", "assistant"])
    messages = [msg("user", "My cat is called Miso"), msg("assistant", "ok")]
    await flush(block, "s1", *messages)
    first = {m.id for m in by_text(store).values()}
    await flush(block, "s1", *messages)
    await flush(block, "s1", msg("assistant", "ok"), msg("assistant", "ok"))
    assert {m.id for m in by_text(store).values()} == first

    # The same words in another session (or from another role) are another memory.
    await flush(block, "s2", msg("assistant", "ok"))
    await flush(block, "s1", msg("user", "ok"))
    assert store.count() == 4


class Writes:
    """Counts the store's write calls (the real calls still run)."""

    def __init__(self, store: HybridMemory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        for name in ("add", "add_many"):
            real = getattr(store, name)

            def counted(*args: Any, _name: str = name, _real: Any = real, **kw: Any) -> Any:
                self.calls.append((_name, len(args[0]) if _name == "add_many" else 1))
                return _real(*args, **kw)

            monkeypatch.setattr(store, name, counted)


async def test_many_messages_are_written_in_one_add_many(
    store: HybridMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = Writes(store, monkeypatch)
    messages = [
        msg("user", f"Note {i}: the backup of server {i} runs at {i % 24}:00") for i in range(40)
    ]
    block = HybridMemoryBlock(memory=store)
    await flush(block, "s1", *messages)
    assert writes.calls == [("add_many", 40)]
    assert store.count() == 40

    # Flushed again (or seen again): nothing to write, no write call.
    await flush(block, "s1", *messages)
    assert writes.calls == [("add_many", 40)]

    # A new block (a restarted program) over the same store: the stored ones are found
    # and left out, the new ones written together.
    again = HybridMemoryBlock(memory=store)
    await flush(
        again, "s1", *messages[:30], msg("user", "Note 40: new"), msg("user", "Note 41: new")
    )
    assert store.count() == 42
    assert writes.calls[-1] == ("add_many", 2)


async def test_store_immediately_stores_each_message_before_any_flush(
    store: HybridMemory,
) -> None:
    block = HybridMemoryBlock(memory=store, store_immediately=True, scope="user", user_id="alice")
    memory = Memory.from_defaults(session_id="alice-1", token_limit=50_000, memory_blocks=[block])
    await memory.aput(msg("user", "My cat is called Miso"))
    await memory.aget()  # what a chat engine or agent does before each LLM call
    assert set(by_text(store)) == {"My cat is called Miso"}
    (stored,) = by_text(store).values()
    assert stored.metadata["session_id"] == "alice-1"

    await memory.aput(msg("assistant", "What a lovely name."))
    await memory.aput(msg("user", "She is orange"))
    await memory.aget()
    # The reply is not stored (roles), the user's next message is.
    assert set(by_text(store)) == {"My cat is called Miso", "She is orange"}
    # Nothing was flushed: the short-term queue still holds all three.
    assert len(await memory.aget_all()) == 3

    # Another session of the same user recalls it at once.
    other = Memory.from_defaults(session_id="alice-2", token_limit=50_000, memory_blocks=[block])
    await other.aput(msg("user", "What is my cat called?"))
    system = (await other.aget())[0]
    assert "My cat is called Miso" in (system.content or "")

    # When the queue flushes later, the same messages are not stored twice.
    await block.aput(await memory.aget_all(), from_short_term_memory=True, session_id="alice-1")
    assert store.count() == 3  # the two facts, and alice-2's question


async def test_without_store_immediately_nothing_is_stored_before_a_flush(
    store: HybridMemory,
) -> None:
    block = HybridMemoryBlock(memory=store)
    memory = Memory.from_defaults(session_id="s1", token_limit=50_000, memory_blocks=[block])
    await memory.aput(msg("user", "My cat is called Miso"))
    await memory.aget()
    assert store.count() == 0


async def test_message_timestamp_becomes_created_at(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    when = datetime(2024, 5, 8, 13, 56, tzinfo=timezone.utc)
    await flush(
        block,
        "s1",
        msg("user", "We adopted Miso from the shelter", timestamp=when),
        msg("user", "Miso turned two years old", created_at="2025-05-08T09:00:00Z"),
    )
    stored = by_text(store)
    assert stored["We adopted Miso from the shelter"].created_at == when
    assert stored["Miso turned two years old"].created_at == datetime(
        2025, 5, 8, 9, 0, tzinfo=timezone.utc
    )
    recalled = await block.aget([msg("user", "when did we adopt Miso?")], session_id="s1")
    assert "- [user, 2024-05-08 13:56] We adopted Miso from the shelter" in recalled


async def test_a_bad_timestamp_is_an_error_and_stores_nothing(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    with pytest.raises(InvalidInputError, match="created_at"):
        await flush(
            block,
            "s1",
            msg("user", "first message"),
            msg("user", "second message", timestamp="next tuesday"),
        )
    assert store.count() == 0


async def test_a_long_message_is_stored_in_parts(tmp_path: Path, minilm: Any) -> None:
    with HybridMemory(path=tmp_path / "m", embedding=minilm, max_text_length=40) as store:
        block = HybridMemoryBlock(memory=store)
        text = "The deploy runbook: " + "".join(f"step {i:02d}; " for i in range(11))
        assert len(text) == 119
        await flush(block, "s1", msg("user", text))
        parts = by_text(store)
        assert len(parts) == 3
        assert "".join(sorted(parts, key=text.index)) == text
        await flush(block, "s1", msg("user", text))
        assert store.count() == 3


# --- recalling ---------------------------------------------------------------------------


async def test_session_scope_recalls_only_this_sessions_memories(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    await flush(block, "s1", msg("user", "My cat is called Miso"))
    await flush(block, "s2", msg("user", "My dog is called Rex"))
    question = [msg("user", "What is my pet called?")]

    in_s1 = await block.aget(question, session_id="s1")
    in_s2 = await block.aget(question, session_id="s2")
    assert "Miso" in in_s1 and "Rex" not in in_s1
    assert "Rex" in in_s2 and "Miso" not in in_s2
    assert await block.aget(question, session_id="s3") == ""


async def test_user_scope_spans_sessions_but_not_users(store: HybridMemory) -> None:
    alice = HybridMemoryBlock(memory=store, scope="user", user_id="alice")
    bob = HybridMemoryBlock(memory=store, scope="user", user_id="bob")
    await flush(alice, "alice-1", msg("user", "My cat is called Miso"))
    await flush(bob, "bob-1", msg("user", "My cat is called Tiger"))
    question = [msg("user", "What is my cat called?")]

    recalled = await alice.aget(question, session_id="alice-2")
    assert "Miso" in recalled and "Tiger" not in recalled
    recalled = await bob.aget(question, session_id="bob-7")
    assert "Tiger" in recalled and "Miso" not in recalled

    alice_per_session = HybridMemoryBlock(memory=store, user_id="alice")
    assert await alice_per_session.aget(question, session_id="alice-2") == ""
    assert "Miso" in await alice_per_session.aget(question, session_id="alice-1")


async def test_all_scope_with_a_fixed_filter(store: HybridMemory) -> None:
    infra = HybridMemoryBlock(memory=store, metadata={"team": "infra"})
    web = HybridMemoryBlock(memory=store, metadata={"team": "web"})
    await flush(infra, "s1", msg("user", "The database backup runs at midnight"))
    await flush(web, "s2", msg("user", "The website backup runs at noon"))
    question = [msg("user", "When does the backup run?")]

    everything = HybridMemoryBlock(memory=store, scope="all")
    assert "midnight" in await everything.aget(question)
    assert "noon" in await everything.aget(question)
    only_infra = HybridMemoryBlock(memory=store, scope="all", filter={"team": "infra"})
    recalled = await only_infra.aget(question, session_id="any")
    assert "midnight" in recalled and "noon" not in recalled


async def test_session_scope_without_a_session_id_is_a_clear_error(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    await flush(block, "s1", msg("user", "My cat is called Miso"))
    with pytest.raises(InvalidInputError, match=r"session_id: scope='session'.*Memory"):
        await block.aget([msg("user", "cat?")])
    fixed = HybridMemoryBlock(memory=store, session_id="s1")
    assert "Miso" in await fixed.aget([msg("user", "What is my cat called?")])


async def test_scopes_do_not_see_each_others_memories(store: HybridMemory) -> None:
    """Whatever one user (or session) stores, and however well it matches, another's
    recall never shows it, also when that other one has nothing at all."""
    alice = HybridMemoryBlock(memory=store, scope="user", user_id="alice", k=10)
    bob = HybridMemoryBlock(memory=store, scope="user", user_id="bob", k=10)
    question = [msg("user", "What is the code of the garage door?")]
    await flush(
        alice, "a1", *[msg("user", f"The garage door code is {1000 + i}") for i in range(30)]
    )
    assert await bob.aget(question, session_id="b1") == ""
    await flush(bob, "b1", msg("user", "The garage door code is 4242"))
    recalled = await bob.aget(question, session_id="b1")
    assert recalled.split("] ", 1)[1] == "The garage door code is 4242"
    assert "4242" not in await alice.aget(question, session_id="a1")

    # Sessions of one user: the session scope shows the session's own only.
    in_a2 = HybridMemoryBlock(memory=store, user_id="alice")
    assert await in_a2.aget(question, session_id="a2") == ""
    await flush(in_a2, "a2", msg("user", "The garage door code changed to 7777"))
    recalled = await in_a2.aget(question, session_id="a2")
    assert recalled.split("] ", 1)[1] == "The garage door code changed to 7777"


async def test_a_namespace_per_user_shares_nothing_with_another(store: HybridMemory) -> None:
    """With ``namespace``, a user's memories live in a namespace of the store: another
    user's recall, tags, counts and keyword scores do not change with them."""
    alice = HybridMemoryBlock(memory=store, namespace="alice", scope="user", user_id="alice")
    bob = HybridMemoryBlock(memory=store, namespace="bob", scope="user", user_id="bob")
    await flush(bob, "b1", msg("user", "The garage door code is 4242"))
    bobs = store.namespace("bob")
    before = bobs.search("garage door code", k=1)[0]

    await flush(
        alice,
        "a1",
        *[msg("user", f"The garage door code is {1000 + i}") for i in range(30)],
    )
    after = bobs.search("garage door code", k=1)[0]
    assert after.id == before.id
    assert after.scores == before.scores  # BM25 statistics of bob's namespace alone
    assert bobs.count() == 1 and store.namespace("alice").count() == 30
    assert store.count() == 0  # nothing in the store outside the namespaces
    assert "user:alice" not in bobs.tags() and "user:alice" in store.namespace("alice").tags()

    question = [msg("user", "What is the garage door code?")]
    recalled = await bob.aget(question, session_id="b2")
    assert recalled.split("] ", 1)[1] == "The garage door code is 4242"
    everything = HybridMemoryBlock(memory=store, namespace="bob", scope="all", k=10)
    assert "4242" in await everything.aget(question) and "1000" not in await everything.aget(
        question
    )


def test_query_is_the_latest_user_and_assistant_texts_newest_first(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, query_messages=3)
    history = [
        msg("user", "oldest question"),
        msg("assistant", "old answer"),
        msg("user", "latest question"),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_name="lookup")]),
        msg("tool", "tool output"),
        msg("assistant", "latest answer"),
        msg("user", "newest question"),
    ]
    assert block.query_for(history) == "newest question\nlatest answer\nlatest question"
    assert HybridMemoryBlock(memory=store, query_messages=1).query_for(history) == (
        "newest question"
    )
    assert block.query_for([msg("system", "be nice"), msg("user", "  ")]) == ""


async def test_recalled_memories_are_rendered_as_lines_within_the_budget(
    store: HybridMemory,
) -> None:
    facts = [
        "My cat is called Miso",
        "Miso likes to sleep on the warm windowsill",
        "Miso is afraid of the vacuum cleaner",
        "Miso eats salmon flavoured food every morning",
        "The vet said Miso is perfectly healthy",
        "Miso has orange fur with white paws",
    ]
    await flush(HybridMemoryBlock(memory=store), "s1", *[msg("user", f) for f in facts])
    question = [msg("user", "Tell me about Miso the cat")]

    roomy = HybridMemoryBlock(memory=store, k=4, max_tokens=1000)
    recalled = await roomy.aget(question, session_id="s1")
    lines = recalled.split("\n")
    assert len(lines) == 4
    assert all(LINE.match(line) for line in lines), lines
    assert {line.split("] ", 1)[1] for line in lines} <= set(facts)

    tight = HybridMemoryBlock(memory=store, k=6, max_tokens=40)
    recalled = await tight.aget(question, session_id="s1")
    assert 1 <= len(recalled.split("\n")) < 6
    assert tokens(recalled) <= 40
    # Best first: the tight budget keeps a prefix of the roomy ranking.
    assert lines[: len(recalled.split("\n"))] == recalled.split("\n")

    custom = HybridMemoryBlock(memory=store, k=1, line_format="* {text} ({role}, {session_id})")
    assert re.fullmatch(r"\* .*Miso.* \(user, s1\)", await custom.aget(question, session_id="s1"))


async def test_min_score_leaves_out_weak_matches(store: HybridMemory) -> None:
    facts = [
        "My cat is called Miso",
        "I work as a nurse at the city hospital",
        "We are planning a trip to Lisbon next spring",
    ]
    await flush(HybridMemoryBlock(memory=store), "s1", *[msg("user", f) for f in facts])
    everything = HybridMemoryBlock(memory=store, k=3)
    unrelated = [msg("user", "How do I compute the derivative of a polynomial?")]
    # Without a cut-off, the best k come back however weak ...
    assert len((await everything.aget(unrelated, session_id="s1")).split("\n")) == 3

    # ... with one, an unrelated question injects nothing, a related one its memory.
    cut = HybridMemoryBlock(memory=store, k=3, min_score=0.3)
    assert await cut.aget(unrelated, session_id="s1") == ""
    recalled = await cut.aget([msg("user", "What is my cat called?")], session_id="s1")
    assert "My cat is called Miso" in recalled
    hits = store.search("What is my cat called?", k=3)
    assert [h.text for h in hits if h.score >= 0.3] == [
        line.split("] ", 1)[1] for line in recalled.split("\n")
    ]


async def test_memories_already_in_the_chat_are_not_repeated(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    await flush(block, "s1", msg("user", "My cat is called Miso"), msg("user", "Miso is orange"))
    chat = [msg("user", "My cat is called Miso"), msg("user", "what colour is my cat Miso?")]
    recalled = await block.aget(chat, session_id="s1")
    assert "Miso is orange" in recalled
    assert "called Miso" not in recalled


async def test_truncation_drops_the_least_relevant_lines_first(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    content = "\n".join(
        [
            "- [user, 2026-01-01 10:00] most relevant",
            "- [user, 2026-01-01 10:00] second",
            "- [user, 2026-01-01 10:00] least relevant",
        ]
    )
    last = tokens("\n- [user, 2026-01-01 10:00] least relevant")
    assert await block.atruncate(content, last) == "\n".join(content.split("\n")[:2])
    assert await block.atruncate(content, last + 1) == content.split("\n")[0]
    assert await block.atruncate(content, 10_000) is None
    assert await block.atruncate(content, 0) == content


async def test_memory_truncates_the_block_to_fit_its_token_limit(store: HybridMemory) -> None:
    facts = [f"Project note {i}: the Miso service uses port {8000 + i}" for i in range(6)]
    await flush(HybridMemoryBlock(memory=store), "s1", *[msg("user", f) for f in facts])
    question = msg("user", "Which ports does the Miso service use?")

    async def system_lines(memory: Memory) -> list[str]:
        system = (await memory.aget())[0]
        assert system.role == "system"
        return [line for line in (system.content or "").split("\n") if line.startswith("- [")]

    block = HybridMemoryBlock(memory=store, k=6, max_tokens=1000)
    roomy = Memory.from_defaults(session_id="s1", token_limit=5000, memory_blocks=[block])
    await roomy.aput(question)
    assert len(await system_lines(roomy)) == 6

    tight = Memory.from_defaults(session_id="s1", token_limit=90, memory_blocks=[block])
    await tight.aput(question)
    kept = await system_lines(tight)
    assert 1 <= len(kept) < 6
    assert kept == (await system_lines(roomy))[: len(kept)]

    never = HybridMemoryBlock(memory=store, k=6, max_tokens=1000, priority=0)
    exempt = Memory.from_defaults(session_id="s1", token_limit=90, memory_blocks=[never])
    await exempt.aput(question)
    assert len(await system_lines(exempt)) == 6


async def test_async_calls_leave_the_event_loop_free(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        await flush(block, "s1", msg("user", "The boiler was serviced in March"))
        after_put = ticks
        await block.aget([msg("user", "When was the boiler serviced?")], session_id="s1")
    finally:
        task.cancel()
    # While the store embedded and wrote (then searched) in a worker thread, the loop
    # kept running other tasks; a blocking call would leave the counter where it was.
    assert after_put > 0
    assert ticks > after_put


# --- construction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field", "allowed"),
    [
        ({"roles": ["user", "robot"]}, "roles", "allowed: system, developer, user"),
        ({"roles": []}, "roles", "allowed: system"),
        ({"scope": "team"}, "scope", "'session', 'user' or 'all'"),
        ({"scope": "user"}, "user_id", "set user_id"),
        ({"k": 0}, "k", "greater than or equal to 1"),
        ({"k": 1000}, "k", "1..100"),
        ({"max_tokens": -5}, "max_tokens", "greater than or equal to 1"),
        ({"min_score": 1.5}, "min_score", "less than or equal to 1"),
        ({"min_score": -0.1}, "min_score", "greater than or equal to 0"),
        ({"min_score": "high"}, "min_score", "valid number"),
        ({"store_immediately": "sometimes"}, "store_immediately", "valid boolean"),
        ({"namespace": ""}, "namespace", "non-empty string"),
        ({"query_messages": 0}, "query_messages", "greater than or equal to 1"),
        ({"line_format": "- {txt}"}, "line_format", "placeholders allowed: role, date, text"),
        ({"line_format": "{text}\n"}, "line_format", "no newline"),
        ({"metadata": {"role": "x"}}, "metadata", "not allowed: role, session_id"),
        ({"filter": {"team": {"$like": "x"}}}, "filter", "$like"),
    ],
)
def test_bad_settings_are_clear_errors(
    store: HybridMemory, kwargs: dict[str, Any], field: str, allowed: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        HybridMemoryBlock(memory=store, **kwargs)
    assert caught.value.field == field
    assert allowed in str(caught.value)
    assert store.count() == 0


def test_bad_settings_open_no_store(tmp_path: Path, minilm: Any) -> None:
    with pytest.raises(InvalidInputError, match="roles"):
        HybridMemoryBlock(path=tmp_path / "never", embedding=minilm, roles=["robot"])
    assert not (tmp_path / "never").exists()


def test_store_arguments_are_checked(store: HybridMemory, store_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"memory: pass either memory= .* or path="):
        HybridMemoryBlock(memory=store, path=store_path)
    with pytest.raises(InvalidInputError, match=r"memory: expected a hybrid_memory\.HybridMemory"):
        HybridMemoryBlock(memory="./memory")  # type: ignore[arg-type]


async def test_a_block_closes_only_the_store_it_opened(
    tmp_path: Path, store: HybridMemory, minilm: Any
) -> None:
    owned = HybridMemoryBlock(path=tmp_path / "own", embedding=minilm, collection="chat")
    await flush(owned, "s1", msg("user", "Written through the block's own store"))
    assert owned.memory is not None and owned.memory.count() == 1
    owned.close()
    with HybridMemory(path=tmp_path / "own", embedding=minilm, collection="chat") as reopened:
        assert reopened.count() == 1

    borrowed = HybridMemoryBlock(memory=store)
    borrowed.close()
    store.add("still open")
    assert store.count() == 1


def test_the_block_serialises_without_its_store(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, user_id="alice")
    dumped = block.model_dump()
    assert "memory" not in dumped and "tokenizer_fn" not in dumped
    assert dumped["user_id"] == "alice"
    assert dumped["line_format"] == DEFAULT_LINE_FORMAT
    memory = Memory.from_defaults(session_id="s1", memory_blocks=[block])
    assert memory.model_dump()["memory_blocks"][0]["name"] == "recalled_memories"


async def test_a_block_can_refuse_short_term_flushes(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, accept_short_term_memory=False)
    await flush(block, "s1", msg("user", "flushed by the Memory"))
    assert store.count() == 0
    await block.aput([msg("user", "put on purpose")], session_id="s1")
    assert set(by_text(store)) == {"put on purpose"}


async def test_the_rest_of_a_session_can_be_stored_at_its_end(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store)
    memory = Memory.from_defaults(session_id="s1", token_limit=15, memory_blocks=[block])
    for text in ["My cat is called Miso", "She is orange", "She likes salmon", "Bye for now"]:
        await memory.aput(msg("user", text))
    flushed = store.count()
    assert 0 < flushed < 4
    # Memory never flushes what is still in its queue; storing all of it is safe, since
    # what was flushed already is not stored twice.
    await block.aput(await memory.aget_all(), session_id=memory.session_id)
    assert set(by_text(store)) == {
        "My cat is called Miso",
        "She is orange",
        "She likes salmon",
        "Bye for now",
    }


async def test_a_message_superseding_a_memory_demotes_and_marks_it(store: HybridMemory) -> None:
    block = HybridMemoryBlock(memory=store, scope="all")
    await flush(block, "s1", msg("user", "I live in Paris, near the river"))
    old_id = next(iter(by_text(store).values())).id
    await flush(block, "s2", msg("user", "I moved to Berlin last week", supersedes=old_id))
    new = by_text(store)["I moved to Berlin last week"]
    assert new.metadata["supersedes"] == old_id
    shown = await block._aget([msg("user", "I live in Paris, near the river: where do I live?")])
    lines = shown.splitlines()
    assert lines[0].endswith("I moved to Berlin last week")
    assert lines[1].endswith("I live in Paris, near the river (superseded by a newer memory)")
    with pytest.raises(InvalidInputError) as err:
        await flush(block, "s3", msg("user", "I moved to Rome", supersedes="no-such-id"))
    assert "supersedes" in err.value.field
    assert store.count() == 2
