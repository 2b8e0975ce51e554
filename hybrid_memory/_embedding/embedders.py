"""One embedding interface over whatever the user passes.

Accepted: a LangChain ``Embeddings`` (``embed_documents`` / ``embed_query``), a
LlamaIndex embedding model (``get_text_embedding_batch`` / ``get_query_embedding``),
a Chroma embedding function (called with ``input=[...]``), or any callable taking
a list of texts and returning one vector per text. ``None`` means the default
model, all-MiniLM-L6-v2 (Chroma's default), run on onnxruntime from its published files,
found locally or downloaded once (:mod:`hybrid_memory._embedding.model_files`; no torch); another
sentence-transformers model by name needs the ``sentence-transformers`` extra.

None of the frameworks is imported here: adapters recognise objects by the
methods they have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from hybrid_memory._embedding.batching import BatchingEmbedder
from hybrid_memory._embedding.default_model import MiniLMEmbedder, SentenceTransformerEmbedder
from hybrid_memory._embedding.vectors import Matrix, Vector, checked_matrix
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.settings import DEFAULT_EMBEDDING_MODEL, HybridMemorySettings


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model."""

    name: str

    def embed_documents(self, texts: list[str]) -> list[Vector]: ...

    def embed_query(self, text: str) -> Vector: ...


class _MethodEmbedder(BatchingEmbedder):
    """LangChain- or LlamaIndex-style objects: separate document and query methods."""

    def __init__(
        self,
        name: str,
        batch_size: int,
        documents: Callable[[list[str]], Any],
        query: Callable[[str], Any],
    ) -> None:
        super().__init__(name, batch_size)
        self._documents = documents
        self._query = query

    def _embed(self, texts: list[str], *, query: bool) -> Any:
        return [self._query(texts[0])] if query else self._documents(texts)


class _CallableEmbedder(BatchingEmbedder):
    """A Chroma embedding function or a plain ``texts -> vectors`` callable."""

    def __init__(self, name: str, batch_size: int, function: Callable[..., Any]) -> None:
        super().__init__(name, batch_size)
        self._function = function
        self._keyword = _takes_input_keyword(function)

    def _embed(self, texts: list[str], *, query: bool) -> Any:
        return self._function(input=texts) if self._keyword else self._function(texts)


def _takes_input_keyword(function: Callable[..., Any]) -> bool:
    """Chroma's EmbeddingFunction protocol is ``__call__(self, input)``."""
    import inspect

    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return "input" in params


def _model_name(obj: Any) -> str:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value:
            return f"{type(obj).__name__}:{value}"
    name_method = getattr(obj, "name", None)
    if callable(name_method):
        try:
            value = name_method()
            if isinstance(value, str) and value:
                return f"chroma:{value}"
        except Exception:
            pass
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{qualname}"


def resolve_embedding(
    embedding: Any, settings: HybridMemorySettings, name: str | None = None
) -> Embedder:
    """Wrap whatever the user passed as an :class:`Embedder`.

    ``name`` (recorded with the collection to catch model mix-ups) defaults to a
    description of the object; pass it when that is not stable across runs.
    """
    batch = settings.embedding_batch_size
    if embedding is None:
        model = settings.embedding_model.removeprefix("sentence-transformers/")
        if (
            model == DEFAULT_EMBEDDING_MODEL
            and settings.embedding_backend != "sentence-transformers"
        ):
            return MiniLMEmbedder(
                batch,
                settings.cache_dir,
                settings.embedding_model_files,
                settings.embedding_model_url,
            )
        return SentenceTransformerEmbedder(model, batch, settings.embedding_model_files)
    if isinstance(embedding, BatchingEmbedder):
        return embedding
    label = name or _model_name(embedding)
    if hasattr(embedding, "embed_documents") and hasattr(embedding, "embed_query"):
        return _MethodEmbedder(label, batch, embedding.embed_documents, embedding.embed_query)
    if hasattr(embedding, "get_text_embedding_batch") and hasattr(embedding, "get_query_embedding"):
        return _MethodEmbedder(
            label, batch, embedding.get_text_embedding_batch, embedding.get_query_embedding
        )
    if callable(embedding):
        return _CallableEmbedder(label, batch, embedding)
    raise InvalidInputError(
        "embedding",
        "expected a LangChain Embeddings, a LlamaIndex embedding model, a Chroma embedding "
        f"function or a callable(list[str]) -> list[vector], got {type(embedding).__name__}",
    )


def document_matrix(embedder: Embedder, texts: list[str]) -> Matrix:
    """Document vectors as a float32 matrix: the fast path for hybrid-memory's own
    adapters, ``embed_documents`` checked and converted for any other Embedder."""
    if isinstance(embedder, BatchingEmbedder):
        return embedder.embed_matrix(texts)
    return checked_matrix(
        embedder.embed_documents(texts), len(texts), f"embedding {embedder.name!r}"
    )
