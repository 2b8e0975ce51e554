"""Where the default model's files come from: a named folder, an earlier download, the
Hugging Face cache, a carrier package (the offline-model extra), else a download over
real HTTP from a server these tests run on 127.0.0.1; and the message when none has them."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hybrid_memory import EmbeddingError, HybridMemory, InvalidInputError
from hybrid_memory._embedding import model_files as minilm_files
from hybrid_memory._embedding.default_model import MiniLMEmbedder
from hybrid_memory._embedding.model_files import (
    CARRIERS,
    OFFLINE_EXTRA,
    REVISION,
    ModelFiles,
    default_model_url,
    downloaded_dir,
    find_model_files,
)

pytestmark = pytest.mark.slow

NO_CARRIER = (("no_such_carrier_package", "model"),)
FILES = ("model.safetensors", "tokenizer.json")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the model's published files, taken from wherever this machine has them."""
    real = find_model_files(download=False)
    folder = tmp_path_factory.mktemp("published")
    for name in FILES:
        shutil.copy(real.directory / name, folder / name)
    return folder


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No local source: an empty Hugging Face cache, no carrier; returns the cache dir."""
    monkeypatch.setattr(minilm_files, "CARRIERS", NO_CARRIER)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path / "cache"


def _link(source: Path, folder: Path) -> ModelFiles:
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (folder / name).symlink_to(source / name)
    return ModelFiles(folder)


def _snapshot(hub: Path, source: Path) -> ModelFiles:
    snapshots = hub / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots"
    return _link(source, snapshots / REVISION)


class _ModelServer(http.server.ThreadingHTTPServer):
    """Serves a folder as the hub does: /resolve/<rev>/<file> redirects to /blobs/<file>."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.requests: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/resolve/{REVISION}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _ModelServer

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        name = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/resolve/"):
            self.send_response(302)
            self.send_header("Location", f"/blobs/{name}")
            self.end_headers()
            return
        path = self.server.folder / name
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.end_headers()
        with path.open("rb") as handle:
            shutil.copyfileobj(handle, self.wfile)

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass


@pytest.fixture
def serve() -> Iterator[type[_ModelServer]]:
    started: list[_ModelServer] = []

    class Started(_ModelServer):
        def __init__(self, folder: Path) -> None:
            super().__init__(folder)
            started.append(self)
            threading.Thread(target=self.serve_forever, daemon=True).start()

    yield Started
    for server in started:
        server.shutdown()
        server.server_close()


# --- the order of the local sources ---------------------------------------------------


def test_a_named_folder_comes_first(published: Path, nowhere: Path, tmp_path: Path) -> None:
    _link(published, downloaded_dir(nowhere))
    _snapshot(tmp_path / "hf-hub", published)
    named = _link(published, tmp_path / "mine")
    assert find_model_files(named.directory, nowhere).directory == named.directory


def test_an_earlier_download_comes_before_the_hugging_face_cache(
    published: Path, nowhere: Path, tmp_path: Path
) -> None:
    snapshot = _snapshot(tmp_path / "hf-hub", published)
    assert find_model_files(None, nowhere).directory == snapshot.directory
    downloaded = _link(published, downloaded_dir(nowhere))
    assert find_model_files(None, nowhere).directory == downloaded.directory


def test_the_hugging_face_cache_comes_before_a_carrier(
    published: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    try:
        find_model_files(None, tmp_path / "cache", download=False)
    except EmbeddingError:
        pytest.skip(f"no carrier installed (the {OFFLINE_EXTRA} extra)")
    snapshot = _snapshot(tmp_path / "hf-hub", published)
    assert find_model_files(None, tmp_path / "cache").directory == snapshot.directory


def test_a_carrier_serves_when_nothing_else_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        files = find_model_files(None, tmp_path / "cache")
    except EmbeddingError:
        pytest.skip(f"no carrier installed (the {OFFLINE_EXTRA} extra)")
    module, folder = next((m, f) for m, f in CARRIERS if m in files.directory.parts)
    assert files.directory.as_posix().endswith(f"{module}/{folder}")
    assert not (tmp_path / "cache").exists()  # nothing downloaded


# --- none of them: the message --------------------------------------------------------


def test_offline_with_no_source_the_first_use_names_all_three(
    nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no download from the default home
    memory = HybridMemory(cache_dir=str(nowhere))
    assert memory.search("anything") == []  # an empty store embeds nothing
    with pytest.raises(EmbeddingError) as caught:
        memory.add("the first memory needs the model")
    assert memory.count() == 0
    message = str(caught.value)
    assert "HYBRID_MEMORY_EMBEDDING_MODEL_FILES" in message
    assert "Hugging Face cache" in message and str(Path(os.environ["HF_HUB_CACHE"])) in message
    assert f"hybrid-agent-memory[{OFFLINE_EXTRA}]" in message
    assert "download failed" not in message  # none was tried
    assert not nowhere.exists()


def test_an_unreachable_home_fails_at_once_naming_all_three(tmp_path: Path) -> None:
    # A host that can never resolve (.invalid, RFC 2606), as on a machine without a
    # network; in a fresh process with the real default sources, no carrier.
    script = (
        "from hybrid_memory import HybridMemory\n"
        "from hybrid_memory._embedding import model_files\n"
        f"model_files.CARRIERS = {NO_CARRIER!r}\n"
        "m = HybridMemory()\n"
        "try:\n"
        "    m.add('x')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = {
        **os.environ,
        "HF_ENDPOINT": "https://hub.hybrid-memory-test.invalid",
        "HF_HUB_CACHE": str(tmp_path / "hf-hub"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HYBRID_MEMORY_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("EmbeddingError"), out.stdout
    assert "download failed: https://hub.hybrid-memory-test.invalid/" in out.stdout
    assert "HYBRID_MEMORY_EMBEDDING_MODEL_FILES" in out.stdout
    assert "Hugging Face cache" in out.stdout and f"[{OFFLINE_EXTRA}]" in out.stdout
    cache = tmp_path / "xdg" / "hybrid-memory"
    assert not cache.exists() or not any(cache.iterdir())  # no staging left over


def test_a_server_that_never_answers_times_out(
    nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_files, "DOWNLOAD_TIMEOUT", 0.5)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)  # connections queue, nobody ever answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/files"
    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            MiniLMEmbedder(cache_dir=str(nowhere), model_url=url).embed_query("x")
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=first_use, daemon=True)
    worker.start()
    worker.join(timeout=60)  # a hang would take forever; the timeout ends it at once
    silent.close()
    assert not worker.is_alive()
    assert isinstance(errors[0], EmbeddingError)
    assert "timed out" in str(errors[0]) and url in str(errors[0])


# --- the download, over real HTTP -----------------------------------------------------


def test_first_use_downloads_checks_and_keeps_the_files(
    published: Path, nowhere: Path, serve: type[_ModelServer]
) -> None:
    server = serve(published)
    memory = HybridMemory(cache_dir=str(nowhere), embedding_model_url=server.url)
    memory.add("downloaded once, then kept in the cache")
    assert memory.search("cache", k=1)[0].text.startswith("downloaded once")
    folder = downloaded_dir(nowhere)
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    for name in FILES:
        assert (folder / name).read_bytes() == (published / name).read_bytes()
    assert not [p for p in nowhere.iterdir() if p.name.startswith(".")]  # no staging
    served = [r for r in server.requests if r.startswith("/blobs/")]
    assert sorted(r.rsplit("/", 1)[1] for r in served) == sorted(FILES)
    # A later process finds the download and asks the server nothing.
    again = MiniLMEmbedder(cache_dir=str(nowhere), model_url=server.url)
    reference = MiniLMEmbedder(model_files=str(published), cache_dir=str(nowhere))
    assert np.allclose(again.embed_query("kept"), reference.embed_query("kept"), atol=1e-6)
    assert len(server.requests) == len(FILES) * 2  # a redirect and a file each, once


def test_a_download_whose_digest_differs_is_refused(
    published: Path, nowhere: Path, tmp_path: Path, serve: type[_ModelServer]
) -> None:
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    shutil.copy(published / "tokenizer.json", tampered / "tokenizer.json")
    weights = bytearray((published / "model.safetensors").read_bytes())
    weights[-1] ^= 0xFF  # one bit pattern changed in the last weight
    (tampered / "model.safetensors").write_bytes(bytes(weights))
    server = serve(tampered)
    with pytest.raises(EmbeddingError, match=r"model\.safetensors \(sha256 .*refused"):
        MiniLMEmbedder(cache_dir=str(nowhere), model_url=server.url).embed_query("x")
    assert not downloaded_dir(nowhere).exists()
    assert list(nowhere.iterdir()) == []  # the staging folder is gone too


def test_a_missing_file_on_the_server_is_named(
    published: Path, nowhere: Path, tmp_path: Path, serve: type[_ModelServer]
) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(published / "tokenizer.json", partial / "tokenizer.json")
    server = serve(partial)
    with pytest.raises(EmbeddingError, match=r"model\.safetensors: HTTP Error 404"):
        MiniLMEmbedder(cache_dir=str(nowhere), model_url=server.url).embed_query("x")
    assert not downloaded_dir(nowhere).exists()


def test_the_default_home_is_the_pinned_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert default_model_url() == (
        f"https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/{REVISION}"
    )
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example/")
    assert default_model_url().startswith("https://mirror.example/sentence-transformers/")


@pytest.mark.parametrize("url", ["ftp://mirror.example/files", "file:///srv/model", "not a url"])
def test_a_url_that_is_not_http_is_refused_at_construction(url: str) -> None:
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_EMBEDDING_MODEL_URL"):
        HybridMemory(embedding_model_url=url)
