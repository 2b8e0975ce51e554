"""The store commands' parts that need no store: the parser, ``--meta``, ``--embedding``,
the tables, the memory browser named as a plugin, and a start that loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hybrid_memory import cli
from hybrid_memory._commands import COMMANDS
from hybrid_memory._commands.memories import metadata_of
from hybrid_memory._commands.output import excerpt, table
from hybrid_memory._commands.store import UsageError, load_embedding


def test_every_store_command_is_in_the_help() -> None:
    help_text = cli.build_parser([]).format_help()
    for name in (*COMMANDS, "mcp", "ui", "eval", "peers"):
        assert name in help_text
    assert "the memory browser (web page)" in help_text


def test_the_memory_browser_is_a_known_plugin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "plugin_commands", dict)
    assert cli.main(["ui", "--port", "8777"]) == 2
    err = capsys.readouterr().err
    assert "pip install hybrid-memory-ui" in err and "pip install -e integrations/ui" in err


def test_a_store_command_is_not_handed_to_a_plugin_of_the_same_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib.metadata import EntryPoint

    shadow = EntryPoint(name="list", value="builtins:len", group=cli.COMMANDS_GROUP)
    monkeypatch.setattr(cli, "plugin_commands", lambda: {"list": shadow})
    monkeypatch.delenv("HYBRID_MEMORY_PATH", raising=False)
    monkeypatch.delenv("HYBRID_MEMORY_URL", raising=False)
    # The built-in runs (and, with no store named, says so) rather than len(argv).
    with pytest.raises(SystemExit) as usage:  # argparse's exit, as for any usage error
        cli.main(["list", "a", "b"])
    assert usage.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert cli.main(["list"]) == 2
    assert "give --path DIR or --url URL" in capsys.readouterr().err


def test_the_package_and_the_parser_load_nothing_heavy() -> None:
    """``import hybrid_memory`` and the command's parser (what ``--help`` and a read
    answered by a path's owner run) load neither Chroma, numpy, pydantic, a model's runtime
    nor the store's own module; naming a public name loads it then."""
    code = (
        "import sys, hybrid_memory\n"
        "from hybrid_memory.cli import build_parser\n"
        "build_parser(['ui']).format_help()\n"
        "heavy = ('chromadb', 'numpy', 'pydantic', 'onnxruntime', 'hybrid_memory._memory.memory')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "hybrid_memory.HybridMemory\n"
        "print('hybrid_memory._memory.memory' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split("\n")[:2] == ["[]", "True"], done.stdout


def test_meta_pairs_are_text_or_json() -> None:
    assert metadata_of(["user=alice", "zip=01234", "eq=a=b", "age:=42", "xs:=[1, 2]"]) == {
        "user": "alice",
        "zip": "01234",
        "eq": "a=b",
        "age": 42,
        "xs": [1, 2],
    }
    assert metadata_of(["on:=true", "empty="]) == {"on": True, "empty": ""}
    for bad, says in (("novalue", "expected K=V"), ("=v", "expected K=V"), ("n:=oops", "not JSON")):
        with pytest.raises(UsageError, match=says):
            metadata_of([bad])


def test_an_embedding_is_named_by_module_and_attribute() -> None:
    made = load_embedding("benchmarks.seeded_embedding:SeededEmbedding")
    assert len(made(["x"])[0]) == 64  # a class: instantiated
    assert load_embedding("math:sqrt")(4) == 2  # anything else: used as it is
    for spec, says in (
        ("no_colon", "MODULE:NAME"),
        ("no_such_module_xyz:x", "cannot import"),
        ("math:nothing_here", "has no"),
    ):
        with pytest.raises(UsageError, match=says):
            load_embedding(spec)


def test_tables_align_columns_and_cut_the_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    table(["id", "text"], [["a", "short"], ["long-id", "a text\nover   lines " + "x" * 60]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id       text"
    assert lines[1] == "a        short"
    assert lines[2].startswith("long-id  a text over lines x") and lines[2].endswith("…")
    assert len(lines[2]) == 40
    assert excerpt("a  b\tc", 10) == "a b c" and excerpt("abcdef", 4) == "abc…"
