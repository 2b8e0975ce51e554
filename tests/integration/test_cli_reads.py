"""The commands that only read, as real processes: on a store, a collection or a
namespace that does not exist they say so in one line (exit 1) and create nothing; on a
path another process holds, that process answers them (the command loads neither
Chroma, numpy, pydantic nor a model) with what the command would have found itself.
And two one-line errors a person meets: ``add --id`` of a stored id names ``--upsert``;
an export into a directory that does not exist names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .test_cli import REPO, SEEDED, as_json, cli, ok, one_line_error, open_store

#: Every command that only reads, with its arguments.
READS = [
    ["list"],
    ["get", "m1"],
    ["search", "pelican"],
    ["tags"],
    ["stats"],
    ["export", "{out}"],
]
#: What the command line runs on, besides the command: the modules it must not load
#: when the path's owner answers it.
HEAVY = ("chromadb", "numpy", "onnxruntime", "pydantic", "hybrid_memory._memory.memory")
_PROBE = (
    "import sys\n"
    "from hybrid_memory.cli import main\n"
    "status = main(sys.argv[1:])\n"
    f"print('loaded:', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    "sys.exit(status)\n"
)


def disk(folder: Path) -> dict[str, int]:
    """Every file and directory under ``folder``, with its size (a directory: 0)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size if p.is_file() else 0)
        for p in folder.rglob("*")
    }


def seeded_store(path: Path) -> None:
    with open_store(path) as memory:
        memory.add("pelican notes of the store", id="m1", tags=["birds"])
        memory.namespace("team").add("pelican notes of the team", id="t1")


def probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command, run as ``cli`` runs it, reporting which heavy modules it loaded."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_MEMORY_")}
    return subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environment | {"HYBRID_MEMORY_SYNC_INTERVAL": "0", **(env or {})},
        timeout=180,
    )


def loaded(done: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(x for x in done.stderr.splitlines() if x.startswith("loaded: "))
    return list(json.loads(line.removeprefix("loaded: ").replace("'", '"')))


@contextmanager
def holder(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store open (an agent, an MCP server, the page)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from hybrid_memory import HybridMemory\n"
            "from benchmarks.seeded_embedding import SeededEmbedding\n"
            f"m = HybridMemory(path={str(path)!r}, embedding=SeededEmbedding(), "
            "embedding_name='seeded-64')\n"
            "print('open', flush=True)\n"
            "sys.stdin.read()\n"
            "m.close()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "open\n"
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)


def _args(command: list[str], out: Path) -> list[str]:
    return [a.replace("{out}", str(out)) for a in command]


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_read_of_a_missing_store_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "export.jsonl"
    before = disk(tmp_path)
    done = cli(*_args(command, out), "--path", str(tmp_path / "typo"), *SEEDED)
    one_line_error(done, 1, f"no store at {tmp_path / 'typo'}")
    assert disk(tmp_path) == before


@pytest.mark.parametrize("held", [False, True], ids=["alone", "beside-an-owner"])
@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_read_of_a_missing_namespace_creates_nothing(
    tmp_path: Path, command: list[str], held: bool
) -> None:
    store = tmp_path / "s"
    seeded_store(store)
    out = tmp_path / "export.jsonl"
    before = disk(tmp_path)
    args = [*_args(command, out), "--path", str(store), *SEEDED]
    if held:
        with holder(store):
            done = cli(*args, "--namespace", "nope")
            again = cli(*args, "--namespace", "team", "--namespace", "nope")
    else:
        done = cli(*args, "--namespace", "nope")
        again = cli(*args, "--namespace", "team", "--namespace", "nope")
    one_line_error(done, 1, "no namespace 'nope' under this store (its namespaces: team")
    one_line_error(again, 1, "no namespace 'nope' under team")
    assert not out.exists()
    with open_store(store) as memory:
        assert memory.namespaces() == ["team"]
        assert memory.namespace("team").namespaces() == []
    after = disk(tmp_path)
    assert set(after) == set(before)  # no file nor directory made (sizes: the index's own)


def test_a_read_of_a_missing_collection_creates_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s"
    seeded_store(store)
    before = disk(tmp_path)
    done = cli("stats", "--collection", "typo", "--path", str(store), *SEEDED)
    one_line_error(done, 1, "no collection 'typo'")
    assert set(disk(tmp_path)) == set(before)


def test_add_of_a_stored_id_names_the_upsert_option(tmp_path: Path) -> None:
    store = ["--path", str(tmp_path / "s"), *SEEDED]
    ok("add", "Bob starts at 7", "--id", "bob-hours", *store)
    refused = cli("add", "Bob starts at 8", "--id", "bob-hours", *store)
    one_line_error(refused, 2, "add --upsert to replace it")
    assert "upsert=True" not in refused.stderr
    ok("add", "Bob starts at 8", "--id", "bob-hours", "--upsert", *store)
    assert as_json("get", "bob-hours", *store)["text"] == "Bob starts at 8"


def test_an_export_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    store = ["--path", str(tmp_path / "s"), *SEEDED]
    ok("add", "kept", *store)
    target = tmp_path / "no-such-dir" / "x.jsonl"
    one_line_error(cli("export", str(target), *store), 2, "no directory")
    assert not (tmp_path / "no-such-dir").exists()


def test_reads_of_a_held_path_are_answered_by_its_owner(tmp_path: Path) -> None:
    store = tmp_path / "s"
    seeded_store(store)
    at = ["--path", str(store), *SEEDED]
    alone = {
        "search": as_json("search", "pelican notes", *at),
        "list": as_json("list", *at),
        "get": as_json("get", "m1", *at),
        "tags": as_json("tags", *at),
        "team": as_json("list", "--namespace", "team", *at),
    }
    with holder(store):
        answers: dict[str, Any] = {}
        for name, args in {
            "search": ["search", "pelican notes"],
            "list": ["list"],
            "get": ["get", "m1"],
            "tags": ["tags"],
            "team": ["list", "--namespace", "team"],
            "stats": ["stats"],
        }.items():
            done = probe(*args, "--json", *at)
            assert done.returncode == 0, done.stderr
            assert loaded(done) == [], (name, done.stderr)  # the owner answered
            answers[name] = json.loads(done.stdout)
        # A write through the owner, then a read: the answer includes it.
        ok("add", "pelican written beside the owner", "--id", "m2", *at)
        listed = probe("list", "--json", *at)
        assert [m["id"] for m in json.loads(listed.stdout)["memories"]] == ["m1", "m2"]
        # The command's own settings hold: its k, not the owner's.
        one = probe("search", "pelican", "--json", *at, env={"HYBRID_MEMORY_K": "1"})
        assert len(json.loads(one.stdout)["hits"]) == 1 and loaded(one) == []
        # A command the owner cannot stand in for (another model named) opens the store
        # itself: the same error as without an owner.
        other = probe("list", "--path", str(store))
        assert other.returncode == 2 and "written with embedding 'seeded-64'" in other.stderr
        assert "hybrid_memory._memory.memory" in loaded(other)  # it opened the store
        missing = probe("get", "nope", *at)
        assert missing.returncode == 1 and "no memory with id 'nope'" in missing.stderr
        assert loaded(missing) == []

    def hits(answer: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
        return [(h["id"], h["ranks"]) for h in answer["hits"]]

    assert hits(answers["search"]) == hits(alone["search"])
    for name in ("list", "get", "tags", "team"):
        assert answers[name] == alone[name], name
    assert answers["stats"]["namespaces"] == ["team"] and answers["stats"]["count"] == 1
