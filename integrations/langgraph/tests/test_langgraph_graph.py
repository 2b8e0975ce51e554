"""HybridMemoryStore in a real compiled LangGraph StateGraph, with LangChain's fake chat
model standing in for the LLM: a node writes memories through the injected store, a
node recalls them with a hybrid search, across conversations, users and a reopen."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.hybrid_memory import HybridMemoryStore


class State(MessagesState):
    recalled: list[str]
    prompt: str


def build_graph(store: BaseStore, replies: list[str]) -> Any:
    model = GenericFakeChatModel(messages=iter(replies))

    def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        """Store what the user asks to be remembered (the store is injected)."""
        user = config["configurable"]["user_id"]
        text = str(state["messages"][-1].content)
        if text.lower().startswith("remember:"):
            fact = text.split(":", 1)[1].strip()
            key = hashlib.sha256(fact.encode()).hexdigest()[:16]
            store.put(("memories", user), key, {"text": fact, "source": "chat"})
        return {}

    def respond(state: State, config: RunnableConfig) -> dict[str, Any]:
        """Recall with a hybrid search (the store taken with get_store()), then answer."""
        user = config["configurable"]["user_id"]
        question = str(state["messages"][-1].content)
        hits = get_store().search(("memories", user), query=question, limit=2)
        recalled = [hit.value["text"] for hit in hits]
        prompt = "Facts about the user:\n" + "\n".join(recalled)
        reply = model.invoke([SystemMessage(prompt), *state["messages"]])
        return {"messages": [reply], "recalled": recalled, "prompt": prompt}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder.compile(store=store)


def ask(graph: Any, user: str, text: str) -> dict[str, Any]:
    config: RunnableConfig = {"configurable": {"user_id": user}}
    result: dict[str, Any] = graph.invoke({"messages": [HumanMessage(text)]}, config)
    return result


async def test_graph_writes_and_recalls_through_the_store(tmp_path: Path) -> None:
    store = HybridMemoryStore(path=tmp_path)
    graph = build_graph(store, ["Noted.", "Noted.", "Noted.", "Avoid peanuts.", "Nothing known."])
    ask(graph, "alice", "Remember: my favourite colour is teal")
    ask(graph, "alice", "Remember: I am allergic to peanuts")
    ask(graph, "bob", "Remember: I love peanut butter sandwiches")
    assert store.list_namespaces() == [("memories", "alice"), ("memories", "bob")]

    # A new conversation: the fact comes back from the store, not from the thread.
    result = ask(graph, "alice", "Which snack should I stay away from?")
    assert result["recalled"][0] == "I am allergic to peanuts"
    assert "I am allergic to peanuts" in result["prompt"]
    assert "peanut butter" not in result["prompt"]  # bob's memory stays bob's
    assert isinstance(result["messages"][-1], AIMessage)
    assert result["messages"][-1].content == "Avoid peanuts."

    # Through the async path (abatch in a worker thread).
    config: RunnableConfig = {"configurable": {"user_id": "carol"}}
    result = await graph.ainvoke({"messages": [HumanMessage("What do I like?")]}, config)
    assert result["recalled"] == []
    store.close()

    # Reopened from disk, in a new graph: what was written is still recalled.
    reopened = HybridMemoryStore(path=tmp_path)
    graph = build_graph(reopened, ["Teal, I believe."])
    result = ask(graph, "alice", "What colour do I like best?")
    assert result["recalled"][0] == "my favourite colour is teal"
    item = reopened.get(
        ("memories", "alice"), hashlib.sha256(b"my favourite colour is teal").hexdigest()[:16]
    )
    assert item is not None and item.value == {
        "text": "my favourite colour is teal",
        "source": "chat",
    }
    reopened.close()
