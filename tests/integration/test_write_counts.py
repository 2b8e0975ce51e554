"""The version of an embedded Chroma path's file: the same reading while nobody writes,
another one after any write, from this process or another."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import chromadb

from hybrid_memory._store.write_counts import ChromaFileVersion


def test_the_marker_moves_with_every_write_and_only_then(tmp_path: Path) -> None:
    marker = ChromaFileVersion(str(tmp_path))
    assert marker.read() is None  # no store there yet: cannot tell
    client = chromadb.PersistentClient(path=str(tmp_path))
    collection = client.create_collection("notes", embedding_function=None)
    first = marker.read()
    assert first is not None
    collection.query(query_embeddings=[[1.0, 0.0]], n_results=1)  # reads do not move it
    collection.count()
    assert marker.read() == first
    collection.add(ids=["a"], embeddings=[[1.0, 0.0]], documents=["a"])
    second = marker.read()
    assert second != first
    collection.delete(ids=["a"])
    assert marker.read() != second
    marker.close()


def test_another_process_write_moves_it(tmp_path: Path) -> None:
    """Another process opens the path, then (told to) writes: the reading stays while it
    only sits open, and moves with its write."""
    script = (
        "import chromadb, sys\n"
        "c = chromadb.PersistentClient(path=sys.argv[1])\n"
        "notes = c.get_or_create_collection('notes', embedding_function=None)\n"
        "print('open', flush=True)\n"
        "sys.stdin.readline()\n"
        "notes.add(ids=['b'], embeddings=[[0.0, 1.0]], documents=['b'])\n"
        "print('written', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert other.stdin is not None and other.stdout is not None
    try:
        assert other.stdout.readline() == "open\n"
        marker = ChromaFileVersion(str(tmp_path))
        before = marker.read()
        assert before is not None
        time.sleep(0.5)
        assert marker.read() == before  # open, not writing
        other.stdin.write("go\n")
        other.stdin.flush()
        assert other.stdout.readline() == "written\n"
        assert marker.read() != before
        marker.close()
    finally:
        other.communicate("\n", timeout=120)
    assert other.returncode == 0
