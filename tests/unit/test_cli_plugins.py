"""Plugin subcommands of ``hybrid-memory``: found through entry points, handed their
arguments, and a known plugin that is missing is named with its install line."""

from __future__ import annotations

from importlib import metadata
from importlib.metadata import EntryPoint

import pytest

from hybrid_memory import cli


def test_a_plugin_command_receives_the_arguments_after_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real entry point: builtins.len(argv) becomes the exit status.
    command = EntryPoint(name="count", value="builtins:len", group=cli.COMMANDS_GROUP)
    monkeypatch.setattr(cli, "plugin_commands", lambda: {"count": command})
    assert cli.main(["count", "a", "--b", "c"]) == 3
    assert cli.main(["count"]) == 0


def test_a_missing_known_plugin_prints_its_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "plugin_commands", dict)
    assert cli.main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert "pip install hybrid-memory-mcp" in err and "pip install -e integrations/mcp" in err


def test_a_plugin_that_fails_to_import_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = EntryPoint(name="mcp", value="no_such_module_xyz:run", group=cli.COMMANDS_GROUP)
    monkeypatch.setattr(cli, "plugin_commands", lambda: {"mcp": broken})
    assert cli.main(["mcp"]) == 2
    assert "pip install hybrid-memory-mcp" in capsys.readouterr().err


def test_the_evaluation_commands_are_plugins_named_when_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The harness is its own distribution: without it, eval and peers say how to get it.
    monkeypatch.setattr(cli, "plugin_commands", dict)
    for name in ("eval", "peers"):
        assert cli.main([name, "somewhere"]) == 2
        err = capsys.readouterr().err
        assert "pip install hybrid-memory-eval" in err
        assert "pip install -e benchmarks/evaluation" in err
    help_text = cli.build_parser([]).format_help()
    assert "eval" in help_text and "not installed" in help_text


def test_the_evaluation_distribution_registers_eval_and_peers() -> None:
    try:
        distribution = metadata.distribution("hybrid-memory-eval")
    except metadata.PackageNotFoundError:
        pytest.skip("hybrid-memory-eval is not installed (pip install -e benchmarks/evaluation)")
    registered = {
        e.name: e.value for e in distribution.entry_points if e.group == cli.COMMANDS_GROUP
    }
    assert registered == {
        "eval": "hybrid_memory_eval.cli:eval_command",
        "peers": "hybrid_memory_eval.cli:peers_command",
    }
    found = cli.plugin_commands()
    assert found["eval"].value == registered["eval"] and found["peers"].load() is not None
