"""Conversions between the frameworks' objects and memories: a hit as a LangChain
``Document`` or a LlamaIndex ``NodeWithScore``, texts with framework-style metadata as the
items of ``HybridMemory.add_many``, the checks of what a caller passes, and the store a
retriever made from texts, documents or nodes gets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.documents import Document
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode
from pydantic import ValidationError

from hybrid_memory._memory.memory import HybridMemory
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.results import Hit, SearchResult

#: Keys this retriever writes into result metadata, besides the memory's own metadata.
RESULT_KEYS = (
    "id",
    "score",
    "fused_score",
    "ranks",
    "scores",
    "tags",
    "created_at",
    "updated_at",
    "similar_ids",
)

# Result keys that describe one search rather than the memory. Adding a retrieved
# Document or node back drops them, so results round-trip into a memory.
_SEARCH_ONLY_KEYS = frozenset(
    {"id", "score", "fused_score", "ranks", "scores", "updated_at", "similar_ids"}
)

# What a LlamaIndex LLM prompt / embedding sees of a node's metadata: the user's
# metadata, tags and creation time help an answer; scores and ranks are noise.
_HIDDEN_FROM_LLM = ["id", "score", "fused_score", "ranks", "scores", "updated_at", "similar_ids"]
_HIDDEN_FROM_EMBEDDING = list(RESULT_KEYS)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _result_metadata(hit: Hit) -> dict[str, Any]:
    memory = hit.memory
    return {
        **memory.metadata,
        "id": memory.id,
        "score": hit.score,
        "fused_score": hit.fused_score,
        "ranks": dict(hit.ranks),
        "scores": dict(hit.scores),
        "tags": list(memory.tags),
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(memory.updated_at),
        "similar_ids": list(hit.similar_ids),
    }


def to_document(hit: Hit) -> Document:
    return Document(page_content=hit.text, id=hit.id, metadata=_result_metadata(hit))


class _MemoryNode(TextNode):
    """A recalled memory as a LlamaIndex text node, identified by its content.

    LlamaIndex tells nodes apart by ``node.hash`` (``QueryFusionRetriever`` merges the
    results of several retrievers and queries by it); a ``TextNode`` hashes its text
    with all its metadata, which here holds this search's score and ranks, so one
    memory recalled by two queries, or also found by another retriever, would count as
    two nodes. This node hashes what the memory holds: its text and the metadata it
    was stored with (the search's keys left out, keys in sorted order), as a
    ``TextNode`` of that text and metadata does: a node of the same text from another
    retriever merges with it when its metadata is the same (none, typically; LlamaIndex
    hashes metadata in insertion order, so keys given in another order stay distinct).
    Serialised, it is a plain ``TextNode``."""

    @property
    def hash(self) -> str:
        return TextNode(text=self.text, metadata=_stored_metadata(self.metadata)).hash


def _stored_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A result's metadata without the keys this retriever adds (tags stay when the
    memory has some: they came in with the metadata)."""
    return {
        key: metadata[key]
        for key in sorted(metadata)
        if key not in RESULT_KEYS or (key == "tags" and metadata[key])
    }


def to_node(hit: Hit) -> NodeWithScore:
    # (mypy's pydantic plugin reads a subclass's metadata field by its alias, extra_info)
    node = _MemoryNode(  # type: ignore[call-arg]
        id_=hit.id,
        text=hit.text,
        metadata=_result_metadata(hit),
        excluded_llm_metadata_keys=list(_HIDDEN_FROM_LLM),
        excluded_embed_metadata_keys=list(_HIDDEN_FROM_EMBEDDING),
    )
    return NodeWithScore(node=node, score=hit.score)


def _memory_item(
    text: str,
    metadata: Mapping[str, Any] | None,
    memory_id: str | None,
    more_tags: list[str],
    *,
    field: str,
) -> dict[str, Any]:
    """One ``HybridMemory.add_many`` item from a text and framework-style metadata."""
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        raise InvalidInputError(field, f"expected a dict, got {type(metadata).__name__}")
    user_metadata = {
        key: value
        for key, value in metadata.items()
        if key not in _SEARCH_ONLY_KEYS and key not in ("tags", "created_at")
    }
    tags = [*tag_list(metadata.get("tags"), field=f"{field}.tags"), *more_tags]
    item: dict[str, Any] = {"text": text, "metadata": user_metadata, "tags": tags}
    if memory_id is not None:
        item["id"] = memory_id
    if metadata.get("created_at") is not None:
        item["created_at"] = metadata["created_at"]
    return item


def min_score_of(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidInputError("min_score", f"expected None or a number in [0, 1], got {value!r}")
    return float(value)


def tag_list(value: Any, *, field: str) -> list[str]:
    """Tags as a list: None → [], "a, b" → ["a", "b"], a list stays a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [tag.strip() for tag in value.split(",") if tag.strip()]
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return list(value)
    raise InvalidInputError(
        field, f"expected a list of tags or a comma-separated string, got {value!r}"
    )


def _tags_per_text(
    tags: Sequence[str] | Sequence[Sequence[str] | None] | str | None, count: int
) -> list[list[str]]:
    """``from_texts`` / ``add_texts`` tags: one list shared by all texts, or one per text."""
    if tags is None or isinstance(tags, str):
        return [tag_list(tags, field="tags")] * count
    tags = list(tags)
    if all(isinstance(tag, str) for tag in tags):
        return [[str(tag) for tag in tags]] * count
    if all(tag is None or not isinstance(tag, str) for tag in tags):
        per_text = per_item(tags, count, "tags")
        return [tag_list(item, field=f"tags[{i}]") for i, item in enumerate(per_text)]
    raise InvalidInputError(
        "tags", "expected one list of tags for every text, or one list per text, not a mix"
    )


def text_list(texts: Iterable[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInputError("texts", "expected a list of strings, got a single string")
    return list(texts)


def per_item(values: Sequence[Any] | None, count: int, field: str) -> list[Any]:
    if values is None:
        return [None] * count
    if isinstance(values, (str, Mapping)):
        raise InvalidInputError(field, f"expected a list with one entry per text, got {values!r}")
    values = list(values)
    if len(values) != count:
        raise InvalidInputError(field, f"expected {count} entries, one per text; got {len(values)}")
    return values


def invalid_argument(exc: ValidationError) -> InvalidInputError:
    first = exc.errors()[0]
    name = ".".join(str(part) for part in first.get("loc", ())) or "HybridRetriever"
    if first.get("type") == "missing" and name == "memory":
        return InvalidInputError(
            "memory",
            "required: pass memory=HybridMemory(...), or use HybridRetriever.from_texts / "
            "from_documents / from_nodes / from_settings",
        )
    if first.get("type") == "extra_forbidden":
        return InvalidInputError(name, "unknown argument of HybridRetriever")
    value = first.get("input")
    return InvalidInputError(name, f"{first.get('msg', str(exc))}; got {value!r}")


def memory_items(
    texts: Iterable[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str | None] | None,
    tags: Sequence[str] | Sequence[Sequence[str] | None] | str | None,
) -> list[dict[str, Any]]:
    """The ``HybridMemory.add_many`` items of texts with framework-style metadata (see
    ``HybridRetriever.add_texts``)."""
    texts = text_list(texts)
    metadatas = per_item(metadatas, len(texts), "metadatas")
    ids = per_item(ids, len(texts), "ids")
    extra_tags = _tags_per_text(tags, len(texts))
    return [
        _memory_item(text, metadata, memory_id, more_tags, field=f"metadatas[{i}]")
        for i, (text, metadata, memory_id, more_tags) in enumerate(
            zip(texts, metadatas, ids, extra_tags, strict=True)
        )
    ]


def checked_documents(documents: Iterable[Any]) -> list[Document]:
    """``documents`` as a list, each a LangChain ``Document`` (else the one that is not
    is named)."""
    documents = list(documents)
    for i, document in enumerate(documents):
        if not isinstance(document, Document):
            raise InvalidInputError(
                f"documents[{i}]",
                f"expected a langchain_core Document, got {type(document).__name__}",
            )
    return documents


def checked_nodes(nodes: Iterable[Any]) -> list[BaseNode]:
    """``nodes`` as a list, each a LlamaIndex node (else the one that is not is named)."""
    nodes = list(nodes)
    for i, node in enumerate(nodes):
        if not isinstance(node, BaseNode):
            raise InvalidInputError(
                f"nodes[{i}]", f"expected a LlamaIndex node, got {type(node).__name__}"
            )
    return nodes


def at_least(result: SearchResult, min_score: float | None) -> SearchResult:
    """``result`` without the hits whose relevance is below ``min_score`` (they are its
    tail: the relevance never increases down the list)."""
    if min_score is None:
        return result
    return SearchResult(
        [hit for hit in result if hit.score >= min_score],
        alpha=result.alpha,
        matched_tags=result.matched_tags,
        fallback_mode=result.fallback_mode,
        fallback_reason=result.fallback_reason,
    )


_R = TypeVar("_R")


def with_memory(cls: Callable[..., _R], memory: HybridMemory | None, fields: dict[str, Any]) -> _R:
    """A retriever made by ``cls`` over ``memory`` (a new in-memory store when None,
    closed again if the retriever cannot be made)."""
    if "memory" in fields:
        raise InvalidInputError("memory", "given twice")
    owned = memory is None
    store = HybridMemory() if memory is None else memory
    try:
        return cls(memory=store, **fields)
    except BaseException:
        if owned:
            store.close()
        raise
