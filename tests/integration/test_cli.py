"""The ``hybrid-memory`` store commands, run as a user runs them: real processes
(``python -m hybrid_memory ...``) on real stores (embedded Chroma on a temporary path, a
Chroma server), with the seeded embedding passed by ``--embedding`` (and the default
model where that is the point). Exit codes, tables, ``--json`` and one-line errors;
export then import into a second path restores every memory on every leg."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory

from ..conftest import SeededEmbedding

REPO = Path(__file__).resolve().parents[2]
SEEDED = [
    "--embedding",
    "benchmarks.seeded_embedding:SeededEmbedding",
    "--embedding-name",
    "seeded-64",
]
NAMESPACES = [[], ["team"], ["team", "alice"]]


def cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``python -m hybrid_memory ARGS`` from the repository's root, without the
    environment's store settings (each test names its store)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_MEMORY_")} | {
        "HYBRID_MEMORY_SYNC_INTERVAL": "0",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "hybrid_memory", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environment,
        timeout=timeout,
    )


def ok(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = cli(*args, **kwargs)
    assert done.returncode == 0, done.stderr
    return done


def as_json(*args: str, **kwargs: Any) -> Any:
    return json.loads(ok(*args, "--json", **kwargs).stdout)


def one_line_error(done: subprocess.CompletedProcess[str], status: int, says: str) -> None:
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    # The error is one line, the last (a note may come before it: "embedding ...").
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(f"hybrid-memory {done.args[3]}: error: "), done.stderr
    assert says in error, error


def open_store(path: Path, name: str = "seeded-64") -> HybridMemory:
    return HybridMemory(path=str(path), embedding=SeededEmbedding(), embedding_name=name)


def fill(path: Path) -> dict[tuple[str, ...], list[str]]:
    """Memories added through the command line, in the store and two namespaces."""
    ids: dict[tuple[str, ...], list[str]] = {}
    store = ["--path", str(path), *SEEDED]
    for n, namespace in enumerate(NAMESPACES):
        where = [arg for name in namespace for arg in ("--namespace", name)]
        ids[tuple(namespace)] = [
            as_json(
                "add",
                f"note {i} in space {n}: pelican{n}q{i} saw marble{i}z{n}",
                "--tag",
                f"t{i}",
                "--meta",
                f"user=u{i}",
                "--meta",
                f"rank:={i}",
                *where,
                *store,
            )["id"]
            for i in range(3)
        ]
    return ids


def test_add_get_list_search_tags_stats_delete(tmp_path: Path) -> None:
    store = ["--path", str(tmp_path / "s"), *SEEDED]
    added = as_json(
        "add",
        "Alice prefers dark mode",
        "--tag",
        "alice",
        "--tag",
        "UI",
        "--meta",
        "user=alice",
        "--meta",
        "age:=42",
        "--meta",
        "zip=01234",
        *store,
    )
    ok("add", "Bob likes light themes", "--id", "bob-1", "--tag", "bob", *store)
    assert ok("add", "-", "--id", "from-stdin", *store, stdin="read from stdin\n").stdout == (
        "from-stdin\n"
    )

    memory = as_json("get", added["id"], *store)
    assert memory["tags"] == ["alice", "ui"]
    assert memory["metadata"] == {"user": "alice", "age": 42, "zip": "01234"}
    assert memory["created_at"].endswith("Z")
    shown = ok("get", "bob-1", *store).stdout
    assert "bob-1" in shown and "Bob likes light themes" in shown and "tags      bob" in shown

    listing = as_json("list", "--limit", "2", *store)
    assert listing["total"] == 3 and [m["id"] for m in listing["memories"]] == [
        added["id"],
        "bob-1",
    ]
    assert as_json("list", "--offset", "2", *store)["memories"][0]["id"] == "from-stdin"
    newest = as_json("list", "--newest", "--limit", "2", *store)["memories"]
    assert [m["id"] for m in newest] == ["from-stdin", "bob-1"]
    table = ok("list", *store)
    assert table.stdout.splitlines()[0].split() == ["id", "created", "tags", "text"]
    assert "1-3 of 3" in table.stderr
    assert [
        m["id"] for m in as_json("list", "--filter", '{"user": "alice"}', *store)["memories"]
    ] == [added["id"]]

    hits = as_json("search", "Alice prefers dark mode", "-k", "2", *store)["hits"]
    assert hits[0]["id"] == added["id"] and hits[0]["rank"] == 1
    assert hits[0]["ranks"]["vector"] == 1 and hits[0]["ranks"]["keyword"] == 1
    table = ok("search", "dark mode", "--tag", "alice", *store).stdout.splitlines()
    assert table[0].split() == ["#", "score", "vector", "keyword", "tag", "id", "text"]
    assert table[1].split()[:5] == ["1", table[1].split()[1], "1", "1", "1"]
    filtered = cli("search", "mode", "--filter", '{"user": "alice"}', "--json", *store)
    assert [h["id"] for h in json.loads(filtered.stdout)["hits"]] == [added["id"]]
    nobody = cli("search", "mode", "--filter", '{"user": "bob"}', "--json", *store)
    assert nobody.returncode == 1 and json.loads(nobody.stdout)["hits"] == []

    assert as_json("tags", *store) == [
        {"tag": "alice", "memories": 1},
        {"tag": "bob", "memories": 1},
        {"tag": "ui", "memories": 1},
    ]
    stats = as_json("stats", *store)
    assert (stats["count"], stats["indexed"], stats["tags"]) == (3, 3, 3)
    assert (stats["embedding"], stats["dimension"], stats["kind"]) == ("seeded-64", 64, "embedded")
    assert "memories    3" in ok("stats", *store).stdout

    refused = cli("delete", "--filter", '{"user": "alice"}', *store)
    assert refused.returncode == 2 and "1 memory matches" in refused.stderr
    assert as_json("stats", *store)["count"] == 3  # nothing deleted without --yes
    assert ok("delete", "--filter", '{"user": "alice"}', "--yes", *store).stdout == (
        "deleted 1 memory\n"
    )
    assert as_json("delete", "bob-1", "from-stdin", *store) == {"deleted": 2}
    assert as_json("stats", *store)["count"] == 0


def test_exit_codes_and_one_line_errors(tmp_path: Path) -> None:
    store = ["--path", str(tmp_path / "s"), *SEEDED]
    ok("add", "the only memory", "--id", "only", *store)
    one_line_error(cli("get", "missing", *store), 1, "no memory with id 'missing'")
    one_line_error(cli("delete", "only", "missing", *store), 1, "no memory with id 'missing'")
    assert as_json("get", "only", *store)["id"] == "only"  # nothing deleted
    none = cli("search", "anything", "--filter", '{"user": "nobody"}', *store)
    assert none.returncode == 1 and none.stdout == "" and "no memories match" in none.stderr
    nothing = cli("delete", "--filter", '{"user": "nobody"}', "--yes", *store)
    assert nothing.returncode == 1 and "deleted 0 memories" in nothing.stdout

    one_line_error(cli("add", "   ", *store), 2, "text: must not be empty or blank")
    one_line_error(cli("add", "again", "--id", "only", *store), 2, "already exists")
    one_line_error(cli("search", "x", "-k", "0", *store), 2, "k: expected an integer")
    one_line_error(cli("list", "--filter", '{"$bad": 1}', *store), 2, "filter")
    one_line_error(cli("add", "x", "--meta", "novalue", *store), 2, "--meta: expected K=V")
    one_line_error(cli("list"), 2, "give --path DIR or --url URL")
    one_line_error(cli("list", "--path", "a", "--url", "http://b"), 2, "not both")
    one_line_error(
        cli("list", "--path", str(tmp_path / "s"), "--embedding", "no_such_module:X"),
        2,
        "cannot import 'no_such_module'",
    )
    # Opened with the default model, the store built with another one is named.
    one_line_error(
        cli("list", "--path", str(tmp_path / "s")), 2, "written with embedding 'seeded-64'"
    )
    usage = cli("search", *store)  # the query is missing: argparse's usage
    assert usage.returncode == 2 and "usage:" in usage.stderr
    bad_json = cli("list", "--filter", "{oops", *store)
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    assert cli("nosuchcommand").returncode == 2


def test_the_environment_names_the_store(tmp_path: Path) -> None:
    path = str(tmp_path / "from-env")
    ok(
        "add",
        "kept where the environment says",
        "--id",
        "e",
        *SEEDED,
        env={"HYBRID_MEMORY_PATH": path},
    )
    with open_store(tmp_path / "from-env") as memory:
        assert memory.get("e").text == "kept where the environment says"
    # --path beats the environment, and so does --url beat its path.
    other = str(tmp_path / "other")
    ok("add", "elsewhere", "--path", other, *SEEDED, env={"HYBRID_MEMORY_PATH": path})
    assert as_json("stats", "--path", other, *SEEDED)["count"] == 1


def test_export_then_import_into_a_second_path(tmp_path: Path) -> None:
    ids = fill(tmp_path / "source")
    exported = tmp_path / "memories.jsonl"
    done = ok("export", str(exported), "--path", str(tmp_path / "source"), *SEEDED)
    assert "exported 9 memories" in done.stderr
    report = as_json("import", str(exported), "--path", str(tmp_path / "target"), *SEEDED)
    assert (report["read"], report["added"], report["embedded"]) == (9, 9, 9)
    assert sorted(report["namespaces"]) == sorted(NAMESPACES)

    with open_store(tmp_path / "source") as source, open_store(tmp_path / "target") as target:
        assert target.namespaces() == ["team"]
        for namespace, memory_ids in ids.items():
            a, b = source, target
            for name in namespace:
                a, b = a.namespace(name), b.namespace(name)
            assert b.get_many(memory_ids) == a.get_many(memory_ids)
            for memory in b.get_many(memory_ids):
                hit = next(h for h in b.search(memory.text, k=5) if h.id == memory.id)
                assert hit.ranks.get("vector") == 1 and hit.ranks.get("keyword") == 1

    again = as_json("import", str(exported), "--path", str(tmp_path / "target"), *SEEDED)
    assert (again["unchanged"], again["added"], again["updated"]) == (9, 0, 0)
    second = tmp_path / "second.jsonl"
    ok("export", str(second), "--path", str(tmp_path / "target"), *SEEDED)
    body = [json.loads(line) for line in second.read_text().splitlines()[1:]]
    original = [json.loads(line) for line in exported.read_text().splitlines()[1:]]
    key = lambda r: (r["namespace"], r["id"])  # noqa: E731
    assert sorted(body, key=key) == sorted(original, key=key)


def test_vectors_round_trip_without_re_embedding_and_through_pipes(tmp_path: Path) -> None:
    fill(tmp_path / "source")
    exported = ok("export", "-", "--vectors", "--path", str(tmp_path / "source"), *SEEDED)
    lines = exported.stdout.splitlines()
    assert json.loads(lines[0])["vectors"] is True and len(lines) == 10
    report = as_json(
        "import", "-", "--path", str(tmp_path / "target"), *SEEDED, stdin=exported.stdout
    )
    assert (report["added"], report["embedded"]) == (9, 0)

    # Another model: refused (nothing written) unless --re-embed.
    other = [
        "--path",
        str(tmp_path / "other"),
        "--embedding",
        "tests.conftest:HashEmbedding",
        "--embedding-name",
        "hash-64",
    ]
    refused = cli("import", "-", *other, stdin=exported.stdout)
    one_line_error(refused, 2, "--re-embed")
    assert "seeded-64" in refused.stderr and "hash-64" in refused.stderr
    assert as_json("stats", *other)["count"] == 0
    moved = ok("import", "-", "--re-embed", *other, stdin=exported.stdout)
    assert "--re-embed: each memory written is embedded by hash-64" in moved.stderr
    assert "9 added" in moved.stderr and "9 embedded by hash-64" in moved.stderr
    assert as_json("stats", *other)["embedding"] == "hash-64"


def test_a_bad_line_is_named_and_its_batch_not_written(tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"m{i}", "text": f"memory {i}"}) for i in range(1500)]
    lines[1199] = json.dumps({"id": "m1199", "text": ["not", "a", "text"]})
    source = tmp_path / "bad.jsonl"
    source.write_text("\n".join(lines) + "\n")
    store = ["--path", str(tmp_path / "s"), *SEEDED]
    one_line_error(cli("import", str(source), *store), 2, "line 1200: text")
    # Lines 1-1000, the first batch, are in; the batch holding line 1200 is not.
    assert as_json("stats", *store)["count"] == 1000
    assert cli("get", "m1000", *store).returncode == 1
    one_line_error(cli("import", str(tmp_path / "missing.jsonl"), *store), 2, "cannot read")


def test_the_default_model_adds_searches_and_imports(tmp_path: Path) -> None:
    store = ["--path", str(tmp_path / "s")]
    added = as_json("add", "The deploy key rotates every ninety days", "--tag", "ops", *store)
    hits = as_json("search", "how often does the deploy key rotate?", *store)["hits"]
    assert hits[0]["id"] == added["id"] and hits[0]["ranks"]["vector"] == 1
    assert as_json("stats", *store)["embedding"] == "sentence-transformers/all-MiniLM-L6-v2"
    exported = ok("export", "-", "--vectors", *store).stdout
    report = as_json("import", "-", "--path", str(tmp_path / "copy"), stdin=exported)
    assert (report["added"], report["embedded"]) == (1, 0)
    copy = ["--path", str(tmp_path / "copy")]
    assert as_json("search", "deploy key rotation", *copy)["hits"][0]["id"] == added["id"]


@pytest.mark.server
def test_a_server_store_is_exported_and_imported(chroma_server: str, tmp_path: Path) -> None:
    server = ["--url", chroma_server, "--collection", f"cli-{uuid.uuid4().hex[:8]}", *SEEDED]
    for namespace in NAMESPACES:
        where = [arg for name in namespace for arg in ("--namespace", name)]
        ok("add", f"kept on the server in {namespace}", "--tag", "srv", *where, *server)
    exported = tmp_path / "server.jsonl"
    ok("export", str(exported), "--vectors", *server)
    report = as_json("import", str(exported), "--path", str(tmp_path / "local"), *SEEDED)
    assert (report["added"], report["embedded"]) == (3, 0)
    local = ["--path", str(tmp_path / "local"), *SEEDED]
    alice = as_json("list", "--namespace", "team", "--namespace", "alice", *local)
    assert [m["text"] for m in alice["memories"]] == ["kept on the server in ['team', 'alice']"]
    assert as_json("stats", *local)["namespaces"] == ["team"]


def test_commands_beside_a_process_owning_the_path(tmp_path: Path) -> None:
    """An agent (here: a process holding the store open) owns the path; the commands
    reach the store through it. Listing and searching work; an export either holds the
    namespaces or refuses, never leaves them out silently."""
    ids = fill(tmp_path / "s")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from hybrid_memory import HybridMemory\n"
            "from benchmarks.seeded_embedding import SeededEmbedding\n"
            f"m = HybridMemory(path={str(tmp_path / 's')!r}, embedding=SeededEmbedding(), "
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
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        store = ["--path", str(tmp_path / "s"), *SEEDED]
        assert as_json("list", *store)["total"] == 3
        assert as_json("search", "pelican0q1 marble1z0", *store)["hits"][0]["id"] == ids[()][1]
        assert as_json("stats", *store)["count"] == 3
        exported = tmp_path / "beside.jsonl"
        done = cli("export", str(exported), *store)
        if done.returncode == 0:
            namespaces = {
                tuple(json.loads(line)["namespace"])
                for line in exported.read_text().splitlines()[1:]
            }
            assert namespaces == {(), ("team",), ("team", "alice")}
        else:
            one_line_error(done, 3, "namespaces cannot be listed from this process")
            assert not exported.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
