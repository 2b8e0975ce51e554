"""HybridRetriever without repeats, on real LangChain and LlamaIndex objects: the ids a
hit stands for in its metadata, the ``mmr`` option (field and per call), and
``on_similar`` when adding texts, documents and nodes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, TextNode

from hybrid_memory import HybridMemory, InvalidInputError
from hybrid_memory._retriever import HybridRetriever

from ..conftest import HashEmbedding

FACT = "Alice is allergic to peanuts"
AGAIN = "Alice is allergic to peanuts (confirmed again)"


@pytest.fixture
def retriever() -> Iterator[HybridRetriever]:
    with HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64") as memory:
        yield HybridRetriever(memory=memory, k=3)


def test_adding_says_what_repeats_and_on_similar_chooses(retriever: HybridRetriever) -> None:
    first = retriever.add_texts([FACT])
    report = retriever.add_texts([AGAIN])
    assert report.results[0].outcome == "similar"  # type: ignore[attr-defined]
    assert report.results[0].similar[0].id == first[0]  # type: ignore[attr-defined]
    stored = {first[0], report[0]}
    dated = Document(page_content="2026-10-13: Alice is allergic to peanuts")
    assert retriever.add_documents([dated], on_similar="skip")[0] in stored
    node = TextNode(text="Alice is allergic to peanuts!", id_="n1")
    assert retriever.insert_nodes([node], on_similar="skip")[0] in stored
    assert retriever.memory.count() == 2


def test_a_hit_names_the_memories_it_stands_for(retriever: HybridRetriever) -> None:
    # Three calls: the memories of one call share one creation time.
    ids = [retriever.add_texts([text])[0] for text in (FACT, "Bob plays chess", AGAIN)]
    document = retriever.invoke("allergic to peanuts")[0]
    folded = document.metadata["similar_ids"]
    assert len(folded) == 1 and {document.id, *folded} == {ids[0], ids[2]}
    node = retriever.retrieve("allergic to peanuts")[0]
    assert node.node.metadata["similar_ids"] == folded
    assert "similar_ids" not in node.node.get_content(metadata_mode=MetadataMode.LLM)
    # Added to another memory, a result's search keys are dropped: it is a memory again.
    with HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64") as other:
        copied = HybridRetriever(memory=other).add_documents([document])[0]
        assert "similar_ids" not in other.get(copied).metadata


def test_mmr_as_a_field_and_per_call(retriever: HybridRetriever) -> None:
    memory = retriever.memory.with_settings(collapse_similar=False)
    plain = HybridRetriever(memory=memory, k=2)
    plain.add_texts([FACT, AGAIN, "2026-10-13: Alice is allergic to peanuts", "Alice likes tea"])
    assert all("peanuts" in d.page_content for d in plain.invoke("alice peanuts"))
    varied = plain.invoke("alice peanuts", mmr=0.8)
    assert [("peanuts" in d.page_content) for d in varied] == [True, False]
    field = HybridRetriever(memory=memory, k=2, mmr=0.8)
    assert [d.id for d in field.invoke("alice peanuts")] == [d.id for d in varied]
    assert [n.node.node_id for n in field.retrieve("alice peanuts")] == [d.id for d in varied]
    with pytest.raises(InvalidInputError, match="mmr"):
        HybridRetriever(memory=memory, mmr=1.5)
    with pytest.raises(InvalidInputError, match="mmr"):
        plain.invoke("alice", mmr=-1)
