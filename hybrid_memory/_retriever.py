"""``HybridRetriever``: one retriever object for LangChain *and* LlamaIndex.

It is a LangChain ``BaseRetriever`` (a runnable: ``invoke``, ``ainvoke``, ``batch``,
LCEL composition, callbacks, ``configurable_fields``) and a LlamaIndex
``BaseRetriever`` (``retrieve``, ``aretrieve``, query engines, chat engines,
``QueryFusionRetriever``) at the same time, over one :class:`HybridMemory`::

    from langchain_core.documents import Document
    from llama_index.core.schema import TextNode

    from hybrid_memory import HybridMemory, HybridRetriever

    memory = HybridMemory()                               # in memory; path="./mem" persists
    retriever = HybridRetriever(memory=memory, k=3)
    retriever.add_texts(
        ["Alice prefers dark mode", "Bob is allergic to peanuts"],
        metadatas=[{"user": "alice", "tags": ["ui"]}, {"user": "bob", "tags": "food,health"}],
    )

    # LangChain: Documents whose id is the memory id
    docs = retriever.invoke("what theme does alice like?")
    docs[0].page_content, docs[0].metadata["score"], docs[0].metadata["ranks"]
    retriever.invoke("allergies", k=1, filter={"user": "bob"})   # per-call overrides

    # LlamaIndex: NodeWithScore whose node id is the memory id
    nodes = retriever.retrieve("what theme does alice like?")
    nodes[0].node.node_id, nodes[0].score

    # Either framework's objects go in, both frameworks see them at once
    retriever.add_documents([Document(page_content="Carol lives in Oslo")])
    retriever.insert_nodes([TextNode(text="Dave drinks his coffee black")])

How the two base classes live together. LangChain's retriever is a pydantic model
(``RunnableSerializable``); LlamaIndex's is a plain ``ABC`` with a ``DispatcherSpanMixin``
and an ``__init__(callback_manager, object_map, objects, verbose)`` that simply sets
attributes. Pydantic's metaclass derives from ``ABCMeta``, so the class statement
itself is sound, and the two share no public method name except ``get_prompts``.
So this class is a pydantic model first (LangChain's base comes first in the MRO
and its ``__init__`` validates the fields), and LlamaIndex's attributes are declared
as pydantic fields (``callback_manager``, ``object_map``, ``verbose``) so that
LlamaIndex's own ``__init__`` runs unchanged on the instance right after validation
(``model_post_init``). Each framework keeps its own entry points (``invoke`` /
``retrieve``) with its own callbacks and tracing; both end in the same private
``search``. LlamaIndex instrumentation spans wrap ``_retrieve`` (through
``DispatcherSpanMixin``, which still runs under pydantic's metaclass) and
``_aretrieve``, as for LlamaIndex's own retrievers.

Two names are shared, and the LangChain meaning wins where they differ:

* ``tags``: LangChain's retriever field for callback tags. Here it holds the memory
  tags that steer the search's tag leg (the ``tags`` of
  :meth:`HybridMemory.search`); as on every LangChain retriever they are also
  attached to the callback run.
* ``get_prompts()``: LangChain's ``Runnable.get_prompts`` (a list). The retriever
  has no prompts in either framework; LlamaIndex's ``update_prompts`` still works.

This module is the only one that imports the frameworks; ``hybrid_memory`` loads
it lazily on first use of ``HybridRetriever``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import llama_index.core.instrumentation as instrument
from langchain_core.callbacks.manager import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever as LangChainBaseRetriever
from llama_index.core.base.base_retriever import BaseRetriever as LlamaIndexBaseRetriever
from llama_index.core.callbacks import CallbackManager as LlamaIndexCallbackManager
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, field_validator
from typing_extensions import Self

from hybrid_memory._memory.memory import HybridMemory
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.results import Hit, SearchResult
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._model.write_outcomes import OnSimilar

#: Search options a single call may override (``invoke(q, k=3)``).
SEARCH_OPTIONS = ("k", "filter", "tags", "alpha", "max_tokens", "after", "before", "mmr")

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

dispatcher = instrument.get_dispatcher(__name__)


class HybridRetriever(LangChainBaseRetriever, LlamaIndexBaseRetriever):  # type: ignore[misc]
    """Hybrid (vector + BM25 + tag) recall over a :class:`HybridMemory`, for both frameworks.

    Args:
        memory: The memory store to search and add to.
        k: Hits per search; ``None`` uses the store's ``settings.k`` (``HYBRID_MEMORY_K``).
        filter: Metadata filter in Chroma ``where`` syntax applied to every search, e.g.
            ``{"user": "alice"}`` or ``{"tags": {"$contains": "ui"}}``.
        tags: Memory tags that steer the tag leg of every search (a list, or a
            comma-separated string). Also sent to LangChain callbacks, as LangChain
            retriever tags always are.
        alpha: Vector share against the keyword leg in ``[0, 1]``; ``None`` is adaptive.
        max_tokens: Token budget of the returned texts; ``None`` means no budget.
        min_score: Drop hits whose relevance (``Hit.score``, in [0, 1]) is below it;
            ``None`` keeps every hit. The relevance is reported as LangChain
            ``metadata["score"]`` and LlamaIndex ``NodeWithScore.score``; the fused RRF
            value as ``metadata["fused_score"]``.
        after, before: Only memories created in ``[after, before)`` (datetimes, ISO 8601
            strings or epoch seconds; either alone is an open window), on every leg
            before its cut.
        mmr: Maximal marginal relevance, the weight of variety in ``[0, 1]`` (LangChain's
            ``lambda_mult`` and LlamaIndex's ``mmr_threshold`` are ``1 - mmr``); ``None``
            uses the store's ``settings.mmr`` (0: relevance alone).
        callback_manager: LlamaIndex callback manager (LlamaIndex's own argument).
        object_map: LlamaIndex ``object_map`` (LlamaIndex's own argument; recalled
            memories are plain text nodes, so it is only kept for compatibility).
        verbose: LlamaIndex verbosity (LlamaIndex's own argument).

    Per call, ``invoke(query, k=..., filter=..., tags=..., alpha=..., max_tokens=...,
    min_score=..., after=..., before=..., mmr=...)``
    overrides the fields; in a chain use ``configurable_fields``::

        from langchain_core.runnables import ConfigurableField

        configurable = retriever.configurable_fields(k=ConfigurableField(id="k"))
        configurable.invoke("query", config={"configurable": {"k": 1}})

    In LlamaIndex, derive a retriever with other fields by
    ``retriever.model_copy(update={"k": 1})``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    memory: HybridMemory
    k: int | None = Field(None, ge=1)
    filter: dict[str, Any] | None = None
    tags: list[str] | None = None
    alpha: float | None = Field(None, ge=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    min_score: float | None = Field(None, ge=0.0, le=1.0)
    after: datetime | str | float | None = None
    before: datetime | str | float | None = None
    mmr: float | None = Field(None, ge=0.0, le=1.0)

    # LlamaIndex's BaseRetriever.__init__ arguments, declared so that it can set them.
    callback_manager: LlamaIndexCallbackManager = Field(
        default_factory=LlamaIndexCallbackManager, exclude=True, repr=False
    )
    object_map: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)
    verbose: bool = False
    _verbose: bool = PrivateAttr(False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _invalid_argument(exc) from exc

    def model_post_init(self, context: Any, /) -> None:
        """Pydantic's hook after validation: LlamaIndex's side of the retriever is set up."""
        super().model_post_init(context)
        # LlamaIndex's initializer, run as written: it fills in a default callback
        # manager and sets object_map and _verbose.
        LlamaIndexBaseRetriever.__init__(
            self,
            callback_manager=self.callback_manager,
            object_map=self.object_map,
            verbose=self.verbose,
        )

    @field_validator("callback_manager", mode="before")
    @classmethod
    def _default_callback_manager(cls, value: Any) -> Any:
        # LlamaIndex code passes callback_manager=None to mean "the default".
        return LlamaIndexCallbackManager() if value is None else value

    @field_validator("tags", mode="before")
    @classmethod
    def _split_tag_string(cls, value: Any) -> Any:
        return _tag_list(value, field="tags") if isinstance(value, str) else value

    # --- constructors --------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        tags: Sequence[str] | Sequence[Sequence[str] | None] | str | None = None,
        ids: Sequence[str | None] | None = None,
        memory: HybridMemory | None = None,
        **kwargs: Any,
    ) -> Self:
        """A retriever over ``memory`` (default: a new in-memory store) holding ``texts``.

        ``tags`` tags the new memories: one list for every text, or one list per
        text. (To steer searches by tag, pass ``tags`` to ``invoke`` or set the
        field.) ``kwargs`` are the retriever's fields (``k``, ``filter``, ...).
        """
        texts = _text_list(texts)
        retriever = cls._with_memory(memory, kwargs)
        retriever.add_texts(texts, metadatas, ids, tags=tags)
        return retriever

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        ids: Sequence[str | None] | None = None,
        memory: HybridMemory | None = None,
        **kwargs: Any,
    ) -> Self:
        """A retriever holding LangChain ``documents`` (see :meth:`add_documents`)."""
        documents = list(documents)
        retriever = cls._with_memory(memory, kwargs)
        retriever.add_documents(documents, ids=ids)
        return retriever

    @classmethod
    def from_nodes(
        cls,
        nodes: Iterable[BaseNode],
        memory: HybridMemory | None = None,
        **kwargs: Any,
    ) -> Self:
        """A retriever holding LlamaIndex ``nodes`` (see :meth:`insert_nodes`)."""
        nodes = list(nodes)
        retriever = cls._with_memory(memory, kwargs)
        retriever.insert_nodes(nodes)
        return retriever

    @classmethod
    def from_settings(cls, settings: HybridMemorySettings | None = None, **kwargs: Any) -> Self:
        """A retriever over a store configured by ``settings``, else by ``HYBRID_MEMORY_*``.

        With no ``k`` given, the number of hits is the store's ``settings.k`` too.
        """
        return cls._with_memory(HybridMemory(settings=settings), kwargs)

    @classmethod
    def _with_memory(cls, memory: HybridMemory | None, fields: dict[str, Any]) -> Self:
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

    # --- adding: LangChain style -------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str | None] | None = None,
        *,
        tags: Sequence[str] | Sequence[Sequence[str] | None] | str | None = None,
        upsert: bool = False,
        allow_duplicates: bool = False,
        on_similar: OnSimilar | None = None,
    ) -> list[str]:
        """Add texts as memories; returns their ids (a :class:`WriteReport`, whose
        ``results`` say what was done with each: ``"similar"`` names the stored memories
        a text repeats).

        ``metadatas[i]["tags"]`` (a list, or a comma-separated string) becomes the
        memory's tags, ``metadatas[i]["created_at"]`` its creation time; the other
        keys are its metadata. ``tags`` adds tags to every text (a list) or per
        text (a list of lists). ``upsert``, ``allow_duplicates`` and ``on_similar`` are
        as in :meth:`HybridMemory.add`.
        """
        texts = _text_list(texts)
        metadatas = _per_item(metadatas, len(texts), "metadatas")
        ids = _per_item(ids, len(texts), "ids")
        extra_tags = _tags_per_text(tags, len(texts))
        items = [
            _memory_item(text, metadata, memory_id, more_tags, field=f"metadatas[{i}]")
            for i, (text, metadata, memory_id, more_tags) in enumerate(
                zip(texts, metadatas, ids, extra_tags, strict=True)
            )
        ]
        return self.memory.add_many(
            items, upsert=upsert, allow_duplicates=allow_duplicates, on_similar=on_similar
        )

    def add_documents(
        self,
        documents: Iterable[Document],
        *,
        ids: Sequence[str | None] | None = None,
        upsert: bool = False,
        allow_duplicates: bool = False,
        on_similar: OnSimilar | None = None,
    ) -> list[str]:
        """Add LangChain ``Document``s as memories; returns their ids (as
        :meth:`add_texts`).

        A document's id (``ids[i]`` if given, else ``Document.id``) becomes the memory
        id; ``metadata["tags"]`` its tags. Keys a retriever writes on results
        (``score``, ``ranks``, ...) are dropped, so retrieved documents can be added
        to another memory as they are.
        """
        documents = list(documents)
        for i, document in enumerate(documents):
            if not isinstance(document, Document):
                raise InvalidInputError(
                    f"documents[{i}]",
                    f"expected a langchain_core Document, got {type(document).__name__}",
                )
        ids = _per_item(ids, len(documents), "ids")
        return self.add_texts(
            [d.page_content for d in documents],
            [d.metadata for d in documents],
            [given or d.id for given, d in zip(ids, documents, strict=True)],
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            on_similar=on_similar,
        )

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """:meth:`add_texts` on a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.add_texts, list(texts), metadatas, ids, **kwargs)

    async def aadd_documents(self, documents: Iterable[Document], **kwargs: Any) -> list[str]:
        """:meth:`add_documents` on a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.add_documents, list(documents), **kwargs)

    # --- adding: LlamaIndex style ------------------------------------------------

    def insert_nodes(
        self,
        nodes: Iterable[BaseNode],
        *,
        upsert: bool = False,
        allow_duplicates: bool = False,
        on_similar: OnSimilar | None = None,
    ) -> list[str]:
        """Add LlamaIndex nodes as memories, keeping each node id; returns the ids.

        The node's content (without metadata) is the text, ``metadata["tags"]`` the
        tags, the rest of its metadata the memory's metadata.
        """
        nodes = list(nodes)
        for i, node in enumerate(nodes):
            if not isinstance(node, BaseNode):
                raise InvalidInputError(
                    f"nodes[{i}]", f"expected a LlamaIndex node, got {type(node).__name__}"
                )
        return self.add_texts(
            [node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes],
            [node.metadata for node in nodes],
            [node.node_id for node in nodes],
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            on_similar=on_similar,
        )

    async def ainsert_nodes(self, nodes: Iterable[BaseNode], **kwargs: Any) -> list[str]:
        """:meth:`insert_nodes` on a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.insert_nodes, list(nodes), **kwargs)

    # --- searching ---------------------------------------------------------------

    def search(self, query: str, **overrides: Any) -> SearchResult:
        """The raw :class:`SearchResult` for ``query``, with this retriever's fields
        and any per-call ``overrides`` (``k``, ``filter``, ``tags``, ``alpha``,
        ``max_tokens``, ``min_score``, ``after``, ``before``, ``mmr``). Hits below ``min_score`` are
        left out (they are the result's tail: the relevance never increases down the
        list)."""
        options: dict[str, Any] = {name: getattr(self, name) for name in SEARCH_OPTIONS}
        min_score = self.min_score
        for name, value in overrides.items():
            if name == "verbose":  # LangChain's invoke() reads it and passes it on
                continue
            if name == "min_score":
                min_score = _min_score(value)
                continue
            if name not in SEARCH_OPTIONS:
                raise InvalidInputError(
                    name,
                    "unknown search option; expected one of "
                    f"{', '.join((*SEARCH_OPTIONS, 'min_score'))}",
                )
            options[name] = _tag_list(value, field="tags") if name == "tags" else value
        result = self.memory.search(query, **options)
        if min_score is None:
            return result
        return SearchResult(
            [hit for hit in result if hit.score >= min_score],
            alpha=result.alpha,
            matched_tags=result.matched_tags,
            fallback_mode=result.fallback_mode,
            fallback_reason=result.fallback_reason,
        )

    # LangChain ---------------------------------------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        return [_to_document(hit) for hit in self.search(query, **overrides)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        result = await asyncio.to_thread(self.search, query, **overrides)
        return [_to_document(hit) for hit in result]

    # LlamaIndex --------------------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_to_node(hit) for hit in self.search(query_bundle.query_str)]

    @dispatcher.span  # as LlamaIndex's own retrievers do; the mixin covers only _retrieve
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await asyncio.to_thread(self.search, query_bundle.query_str)
        return [_to_node(hit) for hit in result]


# --- conversions -------------------------------------------------------------------


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


def _to_document(hit: Hit) -> Document:
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


def _to_node(hit: Hit) -> NodeWithScore:
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
    tags = [*_tag_list(metadata.get("tags"), field=f"{field}.tags"), *more_tags]
    item: dict[str, Any] = {"text": text, "metadata": user_metadata, "tags": tags}
    if memory_id is not None:
        item["id"] = memory_id
    if metadata.get("created_at") is not None:
        item["created_at"] = metadata["created_at"]
    return item


def _min_score(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidInputError("min_score", f"expected None or a number in [0, 1], got {value!r}")
    return float(value)


def _tag_list(value: Any, *, field: str) -> list[str]:
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
        return [_tag_list(tags, field="tags")] * count
    tags = list(tags)
    if all(isinstance(tag, str) for tag in tags):
        return [[str(tag) for tag in tags]] * count
    if all(tag is None or not isinstance(tag, str) for tag in tags):
        per_text = _per_item(tags, count, "tags")
        return [_tag_list(item, field=f"tags[{i}]") for i, item in enumerate(per_text)]
    raise InvalidInputError(
        "tags", "expected one list of tags for every text, or one list per text, not a mix"
    )


def _text_list(texts: Iterable[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInputError("texts", "expected a list of strings, got a single string")
    return list(texts)


def _per_item(values: Sequence[Any] | None, count: int, field: str) -> list[Any]:
    if values is None:
        return [None] * count
    if isinstance(values, (str, Mapping)):
        raise InvalidInputError(field, f"expected a list with one entry per text, got {values!r}")
    values = list(values)
    if len(values) != count:
        raise InvalidInputError(field, f"expected {count} entries, one per text; got {len(values)}")
    return values


def _invalid_argument(exc: ValidationError) -> InvalidInputError:
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
