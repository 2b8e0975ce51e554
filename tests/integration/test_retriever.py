"""HybridRetriever against real LangChain, real LlamaIndex, real Chroma and SQLite.

The only fakes are the LLMs (LangChain's FakeListChatModel, LlamaIndex's MockLLM).
Most tests embed with a cheap deterministic hashed bag of words so they run in
milliseconds; the tests marked ``slow`` use the real default model.
"""

from __future__ import annotations

import asyncio
import math
import re
import subprocess
import sys
import threading
import zlib
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever as LangChainBaseRetriever
from langchain_core.runnables import ConfigurableField, RunnablePassthrough
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever as LlamaIndexBaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.prompts.mixin import PromptMixin
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from hybrid_memory import HybridMemory
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._retriever import HybridRetriever

DIM = 64


def hashed_bow(texts: list[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedding: each word hashed into one of DIM buckets."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIM
        vector[0] = 0.1  # never the zero vector
        for word in re.findall(r"\w+", text.casefold()):
            vector[1 + zlib.crc32(word.encode()) % (DIM - 1)] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        vectors.append([x / norm for x in vector])
    return vectors


MEMORIES = [
    ("Alice prefers dark mode in every editor", ["alice", "ui"], {"user": "alice", "n": 1}),
    ("Alice lives in Lisbon and walks to work", ["alice", "home"], {"user": "alice", "n": 2}),
    ("Bob is allergic to peanuts", ["bob", "health"], {"user": "bob", "n": 3}),
    ("Bob prefers light mode on his phone", ["bob", "ui"], {"user": "bob", "n": 4}),
    ("The team standup is at nine every weekday", ["work"], {"user": "team", "n": 5}),
    ("Carol drinks her coffee black", ["carol", "food"], {"user": "carol", "n": 6}),
]


@pytest.fixture
def memory(tmp_path: Any) -> Any:
    store = HybridMemory(path=str(tmp_path / "store"), embedding=hashed_bow)
    store.add_many(
        {"text": text, "tags": tags, "metadata": metadata} for text, tags, metadata in MEMORIES
    )
    yield store
    store.close()


@pytest.fixture
def retriever(memory: Any) -> HybridRetriever:
    return HybridRetriever(memory=memory, k=3)


def hit_list(results: list[Any]) -> list[tuple[str, float]]:
    """(id, score) pairs of Documents or NodeWithScores, for comparing the two APIs."""
    pairs = []
    for item in results:
        if isinstance(item, Document):
            pairs.append((item.id, item.metadata["score"]))
        else:
            pairs.append((item.node.node_id, item.score))
    return pairs


# --- identity -------------------------------------------------------------------------


def test_is_a_retriever_in_both_frameworks(retriever: HybridRetriever) -> None:
    assert isinstance(retriever, LangChainBaseRetriever)
    assert isinstance(retriever, LlamaIndexBaseRetriever)
    # LlamaIndex's own __init__ ran: default callback manager, object map, verbosity.
    assert isinstance(retriever.callback_manager, CallbackManager)
    assert retriever.object_map == {}
    # LlamaIndex's own private attribute, set by its __init__ and read by its code.
    assert retriever._verbose is False


def test_llama_index_spans_wrap_the_implementations() -> None:
    # DispatcherSpanMixin instruments subclass implementations of abstract methods;
    # that must survive pydantic's metaclass.
    from llama_index.core.instrumentation import DISPATCHER_SPAN_DECORATED_ATTR

    assert hasattr(HybridRetriever.__dict__["_retrieve"], DISPATCHER_SPAN_DECORATED_ATTR)
    assert hasattr(HybridRetriever.__dict__["_aretrieve"], DISPATCHER_SPAN_DECORATED_ATTR)


def test_importing_the_package_does_not_load_the_frameworks() -> None:
    code = (
        "import sys, hybrid_memory, hybrid_memory._memory.memory\n"
        "loaded = [m for m in ('langchain_core', 'llama_index') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "from hybrid_memory import HybridRetriever\n"
        "assert 'langchain_core' in sys.modules and 'llama_index.core' in sys.modules\n"
        "assert HybridRetriever.__module__ == 'hybrid_memory._retriever'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- LangChain --------------------------------------------------------------------


def test_invoke_returns_documents_with_memory_ids_and_scores(
    retriever: HybridRetriever, memory: Any
) -> None:
    docs = retriever.invoke("does alice prefer dark mode?")
    assert len(docs) == 3
    top = docs[0]
    assert top.page_content == "Alice prefers dark mode in every editor"
    assert top.id == top.metadata["id"]
    assert memory.get(top.id).text == top.page_content
    assert top.metadata["user"] == "alice" and top.metadata["n"] == 1
    assert top.metadata["tags"] == ["alice", "ui"]
    assert set(top.metadata["ranks"]) <= {"vector", "keyword", "tag"}
    assert top.metadata["ranks"]["keyword"] == 1
    assert set(top.metadata["scores"]) == set(top.metadata["ranks"])
    assert isinstance(top.metadata["created_at"], str)
    assert top.metadata["created_at"].endswith("+00:00")
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)


def test_batch_answers_each_query(retriever: HybridRetriever) -> None:
    results = retriever.batch(["peanuts allergy", "coffee"])
    assert results[0][0].page_content == "Bob is allergic to peanuts"
    assert results[1][0].page_content == "Carol drinks her coffee black"


async def test_abatch_answers_each_query(retriever: HybridRetriever) -> None:
    results = await retriever.abatch(["peanuts allergy", "coffee"])
    assert results[0][0].page_content == "Bob is allergic to peanuts"
    assert results[1][0].page_content == "Carol drinks her coffee black"


def test_per_call_overrides_through_invoke(retriever: HybridRetriever) -> None:
    assert len(retriever.invoke("mode", k=1)) == 1
    assert len(retriever.invoke("mode", k=5)) == 5
    only_bob = retriever.invoke("prefers mode", filter={"user": "bob"})
    assert only_bob and {d.metadata["user"] for d in only_bob} == {"bob"}
    tagged = retriever.invoke("what do we know", tags=["health"], k=1)
    assert tagged[0].page_content == "Bob is allergic to peanuts"
    assert tagged[0].metadata["ranks"].get("tag") == 1
    # A comma-separated string is a tag list too, as in Document metadata.
    assert retriever.invoke("what do we know", tags="health", k=1)[0].id == tagged[0].id
    # The override is per call: the retriever's own fields are unchanged.
    assert retriever.k == 3 and retriever.filter is None and retriever.tags is None
    assert len(retriever.invoke("mode")) == 3


def test_constructor_fields_apply_to_every_search(memory: Any) -> None:
    retriever = HybridRetriever(memory=memory, k=2, filter={"user": "alice"})
    docs = retriever.invoke("mode")
    assert len(docs) == 2 and {d.metadata["user"] for d in docs} == {"alice"}
    nodes = retriever.retrieve("mode")
    assert hit_list(nodes) == hit_list(docs)
    # A per-call filter replaces the constructor's.
    assert {d.metadata["user"] for d in retriever.invoke("mode", filter={"user": "bob"})} == {"bob"}


def test_unknown_per_call_option_is_rejected(retriever: HybridRetriever) -> None:
    with pytest.raises(InvalidInputError) as info:
        retriever.invoke("mode", top_k=2)
    assert info.value.field == "top_k"
    with pytest.raises(InvalidInputError) as info:
        retriever.invoke("mode", k=0)
    assert "k" in str(info.value)


def test_configurable_fields(retriever: HybridRetriever) -> None:
    configurable = retriever.configurable_fields(
        k=ConfigurableField(id="memory_k", name="Hits"),
        filter=ConfigurableField(id="memory_filter"),
        tags=ConfigurableField(id="memory_tags"),
    )
    assert {spec.id for spec in configurable.config_specs} >= {
        "memory_k",
        "memory_filter",
        "memory_tags",
    }
    assert len(configurable.invoke("mode")) == 3
    one = configurable.invoke("mode", config={"configurable": {"memory_k": 1}})
    assert len(one) == 1
    bob = configurable.invoke(
        "prefers mode", config={"configurable": {"memory_filter": {"user": "bob"}}}
    )
    assert bob and {d.metadata["user"] for d in bob} == {"bob"}
    health = configurable.invoke(
        "what do we know", config={"configurable": {"memory_tags": ["health"], "memory_k": 1}}
    )
    assert health[0].page_content == "Bob is allergic to peanuts"
    # In a chain, and through with_config.
    chain = configurable.with_config(configurable={"memory_k": 2}) | (lambda docs: len(docs))
    assert chain.invoke("mode") == 2


def test_lcel_rag_chain(retriever: HybridRetriever) -> None:
    seen: list[str] = []

    def format_docs(docs: list[Document]) -> str:
        seen.extend(d.page_content for d in docs)
        return "\n".join(d.page_content for d in docs)

    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["Bob is allergic to peanuts."])
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    assert chain.invoke("what is bob allergic to?") == "Bob is allergic to peanuts."
    assert seen[0] == "Bob is allergic to peanuts"


class RecordingHandler(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.events.append(("start", {"query": query, **kwargs}))

    def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
        self.events.append(("end", documents))

    def on_retriever_error(self, error: BaseException, **kwargs: Any) -> None:
        self.events.append(("error", error))


def test_langchain_callbacks_see_a_retriever_run(retriever: HybridRetriever) -> None:
    handler = RecordingHandler()
    docs = retriever.invoke(
        "coffee", config={"callbacks": [handler], "tags": ["trace-me"], "run_name": "recall"}
    )
    assert [name for name, _ in handler.events] == ["start", "end"]
    start = handler.events[0][1]
    assert start["query"] == "coffee"
    assert start["name"] == "recall"
    assert "trace-me" in start["tags"]
    assert start["metadata"]["ls_retriever_name"] == "hybrid"
    assert handler.events[1][1] == docs

    failing = RecordingHandler()
    with pytest.raises(InvalidInputError):
        retriever.invoke("coffee", config={"callbacks": [failing]}, bogus=1)
    assert [name for name, _ in failing.events] == ["start", "error"]


async def test_langchain_callbacks_see_an_async_retriever_run(retriever: HybridRetriever) -> None:
    handler = RecordingHandler()
    await retriever.ainvoke("coffee", config={"callbacks": [handler]})
    assert [name for name, _ in handler.events] == ["start", "end"]


# --- LlamaIndex -------------------------------------------------------------------


def test_retrieve_returns_nodes_with_memory_ids_and_scores(retriever: HybridRetriever) -> None:
    nodes = retriever.retrieve("does alice prefer dark mode?")
    assert len(nodes) == 3
    assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    top = nodes[0]
    assert top.node.get_content() == "Alice prefers dark mode in every editor"
    assert top.node.node_id == top.node.metadata["id"]
    assert top.score == top.node.metadata["score"]
    assert top.node.metadata["tags"] == ["alice", "ui"]
    # The LLM sees the memory's metadata and tags, not the scoring internals.
    llm_view = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "user: alice" in llm_view and "tags:" in llm_view and "ranks" not in llm_view
    # A QueryBundle works as well as a string.
    assert hit_list(retriever.retrieve(QueryBundle("does alice prefer dark mode?"))) == hit_list(
        nodes
    )


def test_both_apis_return_the_same_hits(retriever: HybridRetriever) -> None:
    for query in ["mode", "where does alice live", "peanuts", "standup time"]:
        assert hit_list(retriever.invoke(query)) == hit_list(retriever.retrieve(query))


async def test_sync_and_async_return_the_same_hits(retriever: HybridRetriever) -> None:
    for query in ["mode", "where does alice live", "peanuts"]:
        expected = hit_list(retriever.invoke(query))
        assert hit_list(await retriever.ainvoke(query)) == expected
        assert hit_list(retriever.retrieve(query)) == expected
        assert hit_list(await retriever.aretrieve(query)) == expected
        assert hit_list(await retriever.ainvoke(query, k=1)) == expected[:1]


def test_llama_index_callbacks_see_the_retrieval(memory: Any) -> None:
    debug = LlamaDebugHandler()
    retriever = HybridRetriever(memory=memory, callback_manager=CallbackManager([debug]))
    nodes = retriever.retrieve("coffee")
    pairs = debug.get_event_pairs(CBEventType.RETRIEVE)
    assert len(pairs) == 1
    assert pairs[0][1].payload["nodes"] == nodes


def test_model_copy_gives_llama_index_users_other_fields(retriever: HybridRetriever) -> None:
    one = retriever.model_copy(update={"k": 1})
    assert len(one.retrieve("mode")) == 1
    assert len(retriever.retrieve("mode")) == 3


def test_retriever_query_engine(retriever: HybridRetriever) -> None:
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("what is bob allergic to?")
    assert response.source_nodes[0].node.get_content() == "Bob is allergic to peanuts"
    # MockLLM echoes its prompt, so the memory reached the LLM.
    assert "Bob is allergic to peanuts" in str(response)
    assert engine.get_prompts()  # PromptMixin over the engine still works


async def test_retriever_query_engine_async(retriever: HybridRetriever) -> None:
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery("what is bob allergic to?")
    assert response.source_nodes[0].node.get_content() == "Bob is allergic to peanuts"


def test_context_chat_engine(retriever: HybridRetriever) -> None:
    engine = ContextChatEngine.from_defaults(retriever=retriever, llm=MockLLM())
    reply = engine.chat("how does carol take her coffee?")
    assert reply.source_nodes[0].node.get_content() == "Carol drinks her coffee black"
    assert "Carol drinks her coffee black" in reply.response


@pytest.mark.parametrize("use_async", [False, True])
def test_inside_query_fusion_retriever(retriever: HybridRetriever, use_async: bool) -> None:
    fusion = QueryFusionRetriever(
        [retriever],
        llm=MockLLM(),
        num_queries=1,  # the original query only: no LLM query generation
        similarity_top_k=2,
        use_async=use_async,
        mode="reciprocal_rerank",
    )
    nodes = fusion.retrieve("what is bob allergic to?")
    assert len(nodes) == 2
    assert nodes[0].node.get_content() == "Bob is allergic to peanuts"
    ids = {n.node.node_id for n in retriever.retrieve("what is bob allergic to?")}
    assert {n.node.node_id for n in nodes} <= ids


async def test_inside_query_fusion_retriever_async(retriever: HybridRetriever) -> None:
    fusion = QueryFusionRetriever([retriever], llm=MockLLM(), num_queries=1, similarity_top_k=2)
    nodes = await fusion.aretrieve("what is bob allergic to?")
    assert nodes[0].node.get_content() == "Bob is allergic to peanuts"


def test_prompt_mixin_methods(retriever: HybridRetriever) -> None:
    # get_prompts is LangChain's (the retriever has no prompt in either framework);
    # LlamaIndex's update_prompts still accepts an empty update, and its get_prompts
    # (shadowed, called through its class) finds no prompt and no prompt module.
    assert retriever.get_prompts() == []
    retriever.update_prompts({})
    assert PromptMixin.get_prompts(retriever) == {}


# --- adding through either framework ---------------------------------------------


def test_added_through_langchain_found_through_llama_index(retriever: HybridRetriever) -> None:
    ids = retriever.add_documents(
        [
            Document(
                page_content="Dave keeps a sourdough starter named Gerald",
                metadata={"user": "dave", "tags": "dave, baking"},
                id="dave-1",
            ),
            Document(page_content="Erin runs marathons", metadata={"tags": ["erin", "sport"]}),
        ]
    )
    assert ids[0] == "dave-1" and len(ids) == 2 and ids[1]
    nodes = retriever.retrieve("sourdough starter")
    assert nodes[0].node.node_id == "dave-1"
    assert nodes[0].node.metadata["tags"] == ["dave", "baking"]
    assert nodes[0].node.metadata["user"] == "dave"
    assert retriever.retrieve("marathons")[0].node.node_id == ids[1]

    text_ids = retriever.add_texts(
        ["Frank collects vinyl records"], metadatas=[{"user": "frank"}], ids=["frank-1"]
    )
    assert text_ids == ["frank-1"]
    assert retriever.retrieve("vinyl records")[0].node.metadata["user"] == "frank"


def test_inserted_through_llama_index_found_through_langchain(retriever: HybridRetriever) -> None:
    node = TextNode(
        text="Grace speaks Finnish and Portuguese",
        metadata={"user": "grace", "tags": ["grace", "languages"]},
    )
    ids = retriever.insert_nodes([node])
    assert ids == [node.node_id]
    docs = retriever.invoke("which languages does grace speak")
    assert docs[0].id == node.node_id
    assert docs[0].page_content == "Grace speaks Finnish and Portuguese"
    assert docs[0].metadata["tags"] == ["grace", "languages"]
    assert retriever.invoke("anything", tags=["languages"], k=1)[0].id == node.node_id


async def test_async_adds(retriever: HybridRetriever) -> None:
    [doc_id] = await retriever.aadd_documents([Document(page_content="Heidi plays the oboe")])
    [text_id] = await retriever.aadd_texts(["Ivan repairs old bicycles"])
    [node_id] = await retriever.ainsert_nodes([TextNode(text="Judy grows tomatoes")])
    assert (await retriever.ainvoke("oboe"))[0].id == doc_id
    assert (await retriever.aretrieve("bicycles"))[0].node.node_id == text_id
    assert (await retriever.ainvoke("tomatoes"))[0].id == node_id


def test_retrieved_documents_round_trip_into_another_memory(
    retriever: HybridRetriever, tmp_path: Any
) -> None:
    docs = retriever.invoke("does alice prefer dark mode?", k=2)
    with HybridMemory(path=str(tmp_path / "copy"), embedding=hashed_bow) as other:
        copy = HybridRetriever(memory=other)
        assert copy.add_documents(docs) == [d.id for d in docs]
        stored = other.get(docs[0].id)
        assert stored.text == docs[0].page_content
        assert stored.tags == tuple(docs[0].metadata["tags"])
        assert dict(stored.metadata) == {"user": "alice", "n": 1}
        assert stored.created_at is not None
        assert stored.created_at.isoformat() == docs[0].metadata["created_at"]


def test_adding_an_existing_id_needs_upsert(retriever: HybridRetriever) -> None:
    retriever.add_texts(["Kim likes jazz"], ids=["kim"])
    with pytest.raises(InvalidInputError):
        retriever.add_texts(["Kim likes blues"], ids=["kim"])
    retriever.add_texts(["Kim likes blues"], ids=["kim"], upsert=True)
    assert retriever.invoke("what does kim like", k=1)[0].page_content == "Kim likes blues"


def test_from_texts_tags_shared_or_per_text(memory: Any) -> None:
    shared = HybridRetriever.from_texts(
        ["Liam sails", "Mia climbs"], tags=["hobby"], memory=memory, k=2
    )
    assert shared.k == 2
    found = shared.invoke("anything", tags=["hobby"], filter={"tags": {"$contains": "hobby"}})
    assert {d.page_content for d in found} == {"Liam sails", "Mia climbs"}
    assert all(d.metadata["tags"] == ["hobby"] for d in found)

    per_text = HybridRetriever.from_texts(
        ["Noah paints", "Olga sings"], tags=[["noah", "art"], None], memory=memory
    )
    assert per_text.invoke("Noah paints", k=1)[0].metadata["tags"] == ["noah", "art"]
    assert per_text.invoke("Olga sings", k=1)[0].metadata["tags"] == []


def test_from_documents_and_from_nodes(memory: Any) -> None:
    from_docs = HybridRetriever.from_documents(
        [Document(page_content="Pia brews kombucha", metadata={"tags": ["pia"]})],
        memory=memory,
        k=1,
    )
    assert from_docs.retrieve("kombucha")[0].node.get_content() == "Pia brews kombucha"
    node = TextNode(text="Quinn restores clocks", id_="quinn")
    from_nodes = HybridRetriever.from_nodes([node], memory=memory, k=1)
    assert from_nodes.invoke("clocks")[0].id == "quinn"
    assert from_nodes.memory is from_docs.memory is memory


# --- bad input --------------------------------------------------------------------


def test_invalid_arguments_name_the_field(memory: Any) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "memory"),
        ({"memory": "not a memory"}, "memory"),
        ({"memory": memory, "k": 0}, "k"),
        ({"memory": memory, "alpha": 1.5}, "alpha"),
        ({"memory": memory, "max_tokens": -1}, "max_tokens"),
        ({"memory": memory, "top_k": 3}, "top_k"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidInputError) as info:
            HybridRetriever(**kwargs)
        assert info.value.field == field, (kwargs, info.value)


def test_invalid_adds_name_the_field(retriever: HybridRetriever) -> None:
    with pytest.raises(InvalidInputError) as info:
        retriever.add_texts("a single string")
    assert info.value.field == "texts"
    with pytest.raises(InvalidInputError) as info:
        retriever.add_texts(["a", "b"], metadatas=[{}])
    assert info.value.field == "metadatas"
    with pytest.raises(InvalidInputError) as info:
        retriever.add_texts(["a"], tags=["x", ["y"]])
    assert info.value.field == "tags"
    with pytest.raises(InvalidInputError) as info:
        retriever.add_documents(["not a document"])  # type: ignore[list-item]
    assert info.value.field == "documents[0]"
    with pytest.raises(InvalidInputError) as info:
        retriever.insert_nodes([Document(page_content="x")])  # type: ignore[list-item]
    assert info.value.field == "nodes[0]"
    with pytest.raises(InvalidInputError) as info:
        retriever.add_texts(["a"], metadatas=[{"tags": 5}])
    assert info.value.field == "metadatas[0].tags"
    assert retriever.memory.count() == len(MEMORIES)  # nothing half-added


# --- async never blocks the loop ------------------------------------------------------


class GatedEmbedding:
    """hashed_bow, except that once armed, embedding blocks its thread until the event
    loop has ticked a few times. If the search ran on the loop's thread, the ticker
    could never tick and the wait would time out."""

    def __init__(self) -> None:
        self.armed = False
        self.ticks = 0
        self.enough_ticks = threading.Event()
        self.waited_on: list[bool] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if self.armed:
            self.waited_on.append(self.enough_ticks.wait(timeout=5))
        return hashed_bow(texts)


@pytest.mark.parametrize("api", ["ainvoke", "aretrieve"])
async def test_async_search_does_not_block_the_event_loop(tmp_path: Any, api: str) -> None:
    embedding = GatedEmbedding()
    with HybridMemory(path=str(tmp_path / "gated"), embedding=embedding) as store:
        store.add("The gatekeeper opens at dawn", tags=["gate"])
        retriever = HybridRetriever(memory=store, k=1)
        embedding.armed = True

        async def ticker() -> None:
            while True:
                embedding.ticks += 1
                if embedding.ticks >= 5:
                    embedding.enough_ticks.set()
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        try:
            search = getattr(retriever, api)
            results = await asyncio.wait_for(search("when does the gatekeeper open"), 10)
        finally:
            ticking.cancel()
        assert embedding.waited_on == [True], "the search blocked the event loop"
        assert embedding.ticks >= 5
        embedding.armed = False
        assert hit_list(results)[0][0] == store.search("gatekeeper dawn", k=1)[0].id


# --- the real default model ---------------------------------------------------------


@pytest.mark.slow
def test_from_texts_with_the_default_model_and_both_frameworks() -> None:
    retriever = HybridRetriever.from_texts(
        [
            "The user's favourite colour is teal",
            "The user is vegetarian and avoids fish",
            "The user's dog is called Biscuit",
        ],
        metadatas=[{"tags": "preferences"}, {"tags": ["diet"]}, {"tags": ["pets"]}],
        k=1,
    )
    try:
        # Semantic recall with no shared keyword: the vector leg at work.
        doc = retriever.invoke("What should I cook for dinner?")[0]
        assert doc.page_content == "The user is vegetarian and avoids fish"
        assert "vector" in doc.metadata["ranks"]
        node = retriever.retrieve("name of their puppy")[0]
        assert node.node.get_content() == "The user's dog is called Biscuit"
    finally:
        retriever.memory.close()


@pytest.mark.slow
def test_from_settings_reads_the_environment(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_PATH", str(tmp_path / "env-store"))
    monkeypatch.setenv("HYBRID_MEMORY_K", "2")
    monkeypatch.setenv("HYBRID_MEMORY_COLLECTION", "from-env")
    retriever = HybridRetriever.from_settings()
    try:
        assert retriever.memory.settings.path == str(tmp_path / "env-store")
        assert retriever.memory.settings.collection == "from-env"
        retriever.add_texts(["one apple", "two apples", "three apples"])
        assert len(retriever.invoke("apples")) == 2  # k from HYBRID_MEMORY_K
        assert len(retriever.retrieve("apples")) == 2
    finally:
        retriever.memory.close()
    assert (tmp_path / "env-store").is_dir()


# --- relevance scores, min_score, and fusing with other retrievers --------------------


class BagOfWordsEmbedding(BaseEmbedding):
    """LlamaIndex's embedding interface over an embedding function (the test's hashed
    bag of words, or the store's own model), for a plain LlamaIndex vector index."""

    function: Any = None

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(x) for x in self.function([text])[0]]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def vector_retriever(function: Any, k: int, *, metadata: bool) -> Any:
    """A LlamaIndex VectorStoreIndex retriever over MEMORIES' texts; with ``metadata``,
    each node has its memory's metadata, keys in sorted order (LlamaIndex's node hash
    reads metadata in insertion order)."""
    nodes = [
        TextNode(text=text, metadata=dict(sorted(meta.items())) if metadata else {})
        for text, _, meta in MEMORIES
    ]
    index = VectorStoreIndex(nodes, embed_model=BagOfWordsEmbedding(function=function))
    return index.as_retriever(similarity_top_k=k)


def test_scores_are_relevances_and_fused_scores_stay(retriever: HybridRetriever) -> None:
    docs = retriever.invoke("Alice prefers dark mode in every editor")
    assert docs[0].metadata["score"] == 1.0  # every query word is in it
    for doc in docs:
        assert 0.0 <= doc.metadata["score"] <= 1.0
        assert 0.0 < doc.metadata["fused_score"] < 0.02
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    llm_view = retriever.retrieve("dark mode")[0].node.get_content(MetadataMode.LLM)
    assert "fused_score" not in llm_view


def test_min_score_drops_the_irrelevant_tail(retriever: HybridRetriever) -> None:
    everything = retriever.invoke("does alice prefer dark mode?")
    # "Bob prefers light mode" holds 2 of the 4 query words (prefer, mode): 0.5.
    assert len(everything) == 3 and everything[-1].metadata["score"] <= 0.5
    kept = retriever.invoke("does alice prefer dark mode?", min_score=0.6)
    assert [d.id for d in kept] == [d.id for d in everything if d.metadata["score"] >= 0.6]
    assert kept and all(d.metadata["score"] >= 0.6 for d in kept) and len(kept) < 3
    strict = retriever.model_copy(update={"min_score": 0.99})
    assert [n.score for n in strict.retrieve("Bob is allergic to peanuts")] == [1.0]
    for bad in (-0.1, 1.5, "high", True):
        with pytest.raises(InvalidInputError, match="min_score"):
            retriever.invoke("x", min_score=bad)
    with pytest.raises(InvalidInputError, match="min_score"):
        HybridRetriever(memory=retriever.memory, min_score=2)


def test_one_memory_recalled_twice_is_one_node(retriever: HybridRetriever) -> None:
    first = retriever.retrieve("what is bob allergic to?")[0]
    second = retriever.retrieve("peanuts")[0]
    assert first.node.node_id == second.node.node_id
    assert first.node.metadata["ranks"] != second.node.metadata["ranks"]
    assert first.node.hash == second.node.hash
    # The hash is a TextNode's of the memory's text and stored metadata (and tags).
    stored = {"n": 3, "tags": ["bob", "health"], "user": "bob"}
    assert first.node.hash == TextNode(text=first.node.text, metadata=stored).hash
    assert TextNode.model_validate(first.node.model_dump()).text == first.node.text


@pytest.mark.parametrize(
    "mode", ["simple", "reciprocal_rerank", "relative_score", "dist_based_score"]
)
@pytest.mark.parametrize("metadata", [False, True])
def test_query_fusion_with_a_vector_retriever_returns_each_text_once(
    tmp_path: Any, mode: str, metadata: bool
) -> None:
    memory = HybridMemory(path=str(tmp_path / "fusion"), embedding=hashed_bow)
    memory.add_many(
        {"text": text, "metadata": meta if metadata else {}} for text, _, meta in MEMORIES
    )
    hybrid = HybridRetriever(memory=memory, k=4)
    vector = vector_retriever(hashed_bow, 4, metadata=metadata)
    fusion = QueryFusionRetriever(
        [hybrid, vector],
        llm=MockLLM(),
        num_queries=1,
        similarity_top_k=6,
        mode=mode,
        use_async=False,
    )
    nodes = fusion.retrieve("does alice prefer dark mode?")
    texts = [n.node.get_content() for n in nodes]
    assert len(texts) == len(set(texts)), texts
    assert "Alice prefers dark mode in every editor" in texts
    memory.close()


@pytest.mark.slow
def test_similarity_postprocessor_keeps_the_relevant_hit_with_the_default_model() -> None:
    texts = [
        "The user's favourite colour is teal",
        "The user is vegetarian and avoids fish",
        "The user's dog is called Biscuit",
        "The quarterly budget review is due on Friday",
    ]
    retriever = HybridRetriever.from_texts(texts, k=4)
    try:
        cutoff = SimilarityPostprocessor(similarity_cutoff=0.3)
        for question, answer in [
            ("What should I cook for dinner? Any fish?", texts[1]),
            ("what is the name of their dog", texts[2]),
            ("which colour does the user like", texts[0]),
        ]:
            nodes = retriever.retrieve(question)
            kept = cutoff.postprocess_nodes(nodes, query_str=question)
            assert kept and kept[0].node.get_content() == answer, (question, nodes)
        # A plain vector retriever over the same model keeps the relevant hit too:
        # the relevance lives on the cosine's scale.
        embedder = retriever.memory.embedder
        plain = VectorStoreIndex(
            [TextNode(text=t) for t in texts],
            embed_model=BagOfWordsEmbedding(function=embedder.embed_documents),
        ).as_retriever(similarity_top_k=4)
        question = "What should I cook for dinner? Any fish?"
        assert cutoff.postprocess_nodes(plain.retrieve(question))[0].node.get_content() == texts[1]
        # Nothing relevant: nothing passes the cut-off.
        unrelated = retriever.retrieve("the orbit of Jupiter's moons")
        assert cutoff.postprocess_nodes(unrelated) == []
    finally:
        retriever.memory.close()
