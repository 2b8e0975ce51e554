"""A LlamaIndex query engine and chat engine over the same hybrid memories.

Runs offline as written: memories are embedded with the bundled default model
(all-MiniLM-L6-v2) and LlamaIndex's MockLLM stands in for the LLM. MockLLM echoes
its prompt, so the "answers" below show exactly what context the LLM was given;
pass a real LLM (OpenAI, Ollama, ...) as ``llm=`` to get real answers.

    python examples/llama_index_query_engine.py
"""

from __future__ import annotations

from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import TextNode

from hybrid_memory import HybridMemory, HybridRetriever


def main() -> None:
    memory = HybridMemory()  # in memory; HybridMemory(path="./memory") persists on disk
    try:
        retriever = HybridRetriever(memory=memory, k=2)
        notes = {
            "The deploy freeze starts on Friday at noon": ["release"],
            "Staging runs on the eu-west-1 cluster": ["infra"],
            "Priya owns the billing service": ["people", "billing"],
            "Invoices are generated nightly at 02:00 UTC": ["billing"],
        }
        # LlamaIndex nodes go in as they are; metadata["tags"] become memory tags.
        retriever.insert_nodes(
            [TextNode(text=text, metadata={"tags": tags}) for text, tags in notes.items()]
        )

        question = "Who should I ask about invoices?"
        print(f"Question: {question}\n\nRecalled memories:")
        for hit in retriever.retrieve(question):
            tags = ", ".join(hit.node.metadata["tags"])
            print(f"  {hit.score:.4f}  {hit.node.get_content()}  (tags: {tags})")

        llm = MockLLM()
        query_engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        response = query_engine.query(question)
        print("\nQuery engine sources:", [n.node.get_content() for n in response.source_nodes])
        print(f"Query engine prompt seen by the LLM (MockLLM echoes it):\n{response}\n")

        chat_engine = ContextChatEngine.from_defaults(retriever=retriever, llm=llm)
        reply = chat_engine.chat("When does the deploy freeze start?")
        print("Chat engine sources:", [n.node.get_content() for n in reply.source_nodes])
        print(f"Chat engine prompt seen by the LLM:\n{reply.response}")
    finally:
        memory.close()


if __name__ == "__main__":
    main()
