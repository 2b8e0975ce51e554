"""all-MiniLM-L6-v2 on onnxruntime, without torch or sentence-transformers: the session.

The model's files as published are found (or downloaded once) and checked against
pinned digests by :mod:`hybrid_memory._embedding.model_files`, so the vectors are those of
sentence-transformers' all-MiniLM-L6-v2 wherever the files came from. At first use the
BERT encoder is written out as an ONNX graph (:mod:`hybrid_memory._embedding.onnx_writer`:
standard operators only, weights as initializers) and run by onnxruntime, which Chroma
already depends on; the graph is kept in a cache directory, so later processes skip the
build. Tokenisation is the model's own WordPiece ``tokenizer.json`` run by
``tokenizers`` (lower-casing, at most 256 tokens, as sentence-transformers truncates),
then mean pooling over the attention mask and L2 normalisation, as the model's pooling
config says.

Nothing here imports torch, transformers or sentence-transformers.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hybrid_memory._embedding.model_files import (
    TOKENIZER_SHA256,
    WEIGHTS_SHA256,
    ModelFiles,
    default_cache_dir,
    mismatch,
    read_safetensors,
    sha256_of,
    verify,
)
from hybrid_memory._embedding.onnx_writer import HIDDEN, write_onnx

MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
#: Bumped whenever the graph written by :func:`write_onnx` changes, so cached graphs are
#: rebuilt.
GRAPH_VERSION = 1

Matrix = npt.NDArray[np.float32]


# --- the cached graph ----------------------------------------------------------------


def graph_dir(cache_dir: Path) -> Path:
    """Where the graph of these weights, written by this version of the writer, lives."""
    return cache_dir / f"minilm-onnx-v{GRAPH_VERSION}-{WEIGHTS_SHA256[:16]}"


def _build_cached(files: ModelFiles, cache_dir: Path) -> Path:
    """The cached graph's ``model.onnx``, written first if it is not there yet.

    The graph and its data are written to a fresh folder that is then renamed into
    place, so a reader never sees half a graph and concurrent first uses agree.
    """
    final = graph_dir(cache_dir)
    model = final / "model.onnx"
    if model.is_file():
        return model
    verify(files)
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".minilm-", dir=cache_dir))
    try:
        weights = read_safetensors(files.weights)
        with (
            (staging / "model.onnx").open("wb") as out,
            (staging / "weights.bin").open("wb") as data,
        ):
            write_onnx(weights, out, data, "weights.bin")
        try:
            staging.rename(final)
        except OSError:
            if not model.is_file():  # not a concurrent writer that won: a real failure
                raise
    finally:
        if staging.exists():
            for leftover in staging.iterdir():
                leftover.unlink()
            staging.rmdir()
    return model


def _build_in_memory(files: ModelFiles) -> bytes:
    """The graph with its weights inline, for when no cache directory is writable."""
    import io

    verify(files)
    buffer = io.BytesIO()
    write_onnx(read_safetensors(files.weights), buffer)
    return buffer.getvalue()


# --- the embedder --------------------------------------------------------------------


def _session_options() -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no shape-merge warnings on stderr
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    # Idle worker threads sleep instead of spinning: a memory store shares the CPU
    # with the agent around it.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class MiniLM:
    """all-MiniLM-L6-v2: tokenizer and onnxruntime session, loaded once, thread-safe."""

    def __init__(self, files: ModelFiles, cache_dir: Path | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if sha256_of(files.tokenizer) != TOKENIZER_SHA256:
            raise mismatch(files.tokenizer)
        tokenizer = Tokenizer.from_file(str(files.tokenizer))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer = tokenizer
        source: str | bytes
        try:
            source = str(_build_cached(files, cache_dir or default_cache_dir()))
        except OSError:
            source = _build_in_memory(files)
        self.session = ort.InferenceSession(
            source, _session_options(), providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: list[str], batch_size: int, *, by_length: bool = True) -> Matrix:
        """L2-normalised mean-pooled vectors, one row per text, in the order given.

        Texts are run in batches of similar token counts, so little is padding (each batch
        is padded to its longest text); ``by_length=False`` runs them in the order given
        instead, the same vectors at more cost (kept to measure what the sort saves:
        ``benchmarks/embedding_rate.py``).
        """
        encodings = self.tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(lengths, kind="stable") if by_length else np.arange(len(texts))
        pooled = np.empty((len(texts), HIDDEN), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            for i, row in enumerate(rows):
                ids[i, : lengths[row]] = encodings[row].ids
            mask = (np.arange(width) < lengths[rows, None]).astype(np.int64)
            (hidden,) = self.session.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask}
            )
            summed = np.einsum("btd,bt->bd", hidden, mask.astype(np.float32))
            pooled[rows] = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)
