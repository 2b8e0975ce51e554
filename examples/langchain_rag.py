"""A LangChain RAG chain that answers from hybrid memories.

Runs offline as written: memories are embedded with the bundled default model
(all-MiniLM-L6-v2) and LangChain's FakeListChatModel stands in for the LLM, so
swap in a real chat model (ChatOpenAI, ChatOllama, ...) to get real answers.

    python examples/langchain_rag.py
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from hybrid_memory import HybridMemory, HybridRetriever


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"- {doc.page_content} ({doc.metadata['created_at'][:10]})" for doc in docs)


def main() -> None:
    memory = HybridMemory()  # in memory; HybridMemory(path="./memory") persists on disk
    try:
        retriever = HybridRetriever(memory=memory, k=3)
        retriever.add_texts(
            [
                "Alice prefers dark mode in every editor",
                "Alice is allergic to peanuts",
                "Bob's standup is at 9:30 every weekday",
                "Alice is learning Portuguese for a move to Lisbon",
                "Bob takes his coffee black",
            ],
            metadatas=[
                {"user": "alice", "tags": ["ui"]},
                {"user": "alice", "tags": ["health", "food"]},
                {"user": "bob", "tags": ["work"]},
                {"user": "alice", "tags": ["languages"]},
                {"user": "bob", "tags": ["food"]},
            ],
        )
        question = "What food should I avoid when cooking for Alice?"

        print(f"Question: {question}\n\nRecalled memories:")
        for doc in retriever.invoke(question):
            ranks = ", ".join(f"{leg} #{rank}" for leg, rank in doc.metadata["ranks"].items())
            print(f"  {doc.metadata['score']:.4f}  {doc.page_content}  [{ranks}]")

        # Per call: only Alice's memories, one hit.
        alice_only = retriever.invoke(question, k=1, filter={"user": "alice"})
        print(f"\nTop memory with filter user=alice: {alice_only[0].page_content}")

        prompt = ChatPromptTemplate.from_template(
            "Answer from these memories about the user:\n{context}\n\nQuestion: {question}"
        )
        llm = FakeListChatModel(responses=["Avoid peanuts: Alice is allergic to them."])
        chain = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()}
            | prompt
            | llm
            | StrOutputParser()
        )
        print(f"\nAnswer: {chain.invoke(question)}")
    finally:
        memory.close()


if __name__ == "__main__":
    main()
