"""Long-term memory for a LangGraph agent, kept in hybrid-memory.

A compiled ``StateGraph`` gets a ``HybridMemoryStore`` with ``compile(store=...)``:
one node writes what the user asks it to remember through the injected ``store``,
another recalls the facts relevant to the question with a hybrid (vector + BM25 +
tag) search and hands them to the chat model. The store lives on disk, so a second
process (here: the store reopened) still recalls them.

Runs offline as written: the bundled default embedding model (all-MiniLM-L6-v2)
and LangChain's GenericFakeChatModel in place of an LLM (swap in ChatOpenAI,
ChatOllama, ...). Needs ``pip install -e ./integrations/langgraph``.

    python examples/langgraph_store.py
"""

from __future__ import annotations

import hashlib
import tempfile
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.hybrid_memory import HybridMemoryStore


class State(MessagesState):
    recalled: list[str]


def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    """Store a fact the user states with "Remember: ..." under ("memories", user)."""
    user = config["configurable"]["user_id"]
    text = str(state["messages"][-1].content)
    if text.lower().startswith("remember:"):
        fact = text.split(":", 1)[1].strip()
        key = hashlib.sha256(fact.encode()).hexdigest()[:16]
        store.put(("memories", user), key, {"text": fact})
    return {}


def build_graph(store: BaseStore, replies: list[str]) -> Any:
    model = GenericFakeChatModel(messages=iter(replies))

    def respond(state: State, config: RunnableConfig) -> dict[str, Any]:
        """Recall the facts relevant to the question, then answer with them in the prompt."""
        user = config["configurable"]["user_id"]
        question = str(state["messages"][-1].content)
        hits = get_store().search(("memories", user), query=question, limit=2)
        recalled = [hit.value["text"] for hit in hits]
        system = SystemMessage("Facts about the user:\n" + "\n".join(recalled))
        return {"messages": [model.invoke([system, *state["messages"]])], "recalled": recalled}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder.compile(store=store)


def turn(graph: Any, user: str, text: str) -> dict[str, Any]:
    config: RunnableConfig = {"configurable": {"user_id": user}}
    result: dict[str, Any] = graph.invoke({"messages": [HumanMessage(text)]}, config)
    print(f"{user}: {text}")
    for fact in result["recalled"]:
        print(f"    recalled: {fact}")
    print(f"    assistant: {result['messages'][-1].content}")
    return result


def main() -> None:
    with tempfile.TemporaryDirectory() as path:
        with HybridMemoryStore(path=path) as store:
            graph = build_graph(store, ["Noted."] * 3 + ["Better skip the satay."])
            turn(graph, "alice", "Remember: I am allergic to peanuts")
            turn(graph, "alice", "Remember: my favourite colour is teal")
            turn(graph, "bob", "Remember: I love peanut butter sandwiches")
            answer = turn(graph, "alice", "Which snack should I stay away from?")
            assert answer["recalled"][0] == "I am allergic to peanuts", answer["recalled"]
            print("namespaces:", store.list_namespaces())

        print("-- store reopened from disk --")
        with HybridMemoryStore(path=path) as store:
            graph = build_graph(store, ["Teal, as you told me."])
            answer = turn(graph, "alice", "What colour do I like best?")
            assert answer["recalled"][0] == "my favourite colour is teal", answer["recalled"]


if __name__ == "__main__":
    main()
