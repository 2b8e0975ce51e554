"""The collection converter (benchmarks/collections.py) and the converted collections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hybrid_memory_eval import load_dataset

from benchmarks.collections import available, cache_root, convert_smart

SMART_DOCS = """.I 1
.T
wing flutter at high speed
.W
flutter of a swept wing was measured in the tunnel .
.I 2
.T
boundary layer transition
.W
transition on a flat plate at low turbulence .
"""
SMART_QUERIES = """.I 001
.W
what is known about wing flutter ?
.I 002
.W
when does the boundary layer become turbulent ?
"""
SMART_RELS = "1 1 0 0\n2 2 0 0\n2 9 0 0\n"


def test_smart_collection_converts_to_the_shared_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "toy"
    source.mkdir()
    (source / "TOY.ALL").write_text(SMART_DOCS)
    (source / "TOY.QRY").write_text(SMART_QUERIES)
    (source / "TOY.REL").write_text(SMART_RELS)
    monkeypatch.setenv("HYBRID_MEMORY_COLLECTIONS", str(tmp_path / "out"))
    folder = convert_smart(source, "toy")
    assert folder == cache_root() / "toy"
    dataset = load_dataset(folder)
    assert [d.text for d in dataset.corpus] == [
        "wing flutter at high speed . flutter of a swept wing was measured in the tunnel .",
        "boundary layer transition . transition on a flat plate at low turbulence .",
    ]
    assert [q.id for q in dataset.judged_queries()] == ["1", "2"]
    assert dataset.qrels == {"1": {"1": 1}, "2": {"2": 1}}  # doc 9 is not in the corpus
    assert "toy" in available()
    first = json.loads((folder / "corpus.jsonl").read_text().splitlines()[0])
    assert first == {"_id": "1", "text": dataset.corpus[0].text}


@pytest.mark.slow
def test_every_found_collection_loads() -> None:
    found = available()
    if len(found) < 3:
        pytest.skip(
            f"only {sorted(found)} found; convert more with benchmarks/collections.py "
            f"into {cache_root()}"
        )
    for name, folder in found.items():
        dataset = load_dataset(folder)
        assert dataset.judged_queries(), name
