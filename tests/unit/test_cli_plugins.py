"""Plugin subcommands of ``hybrid-memory``: found through entry points, handed their
arguments, and a known plugin that is missing is named with its install line."""

from __future__ import annotations

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


def test_builtin_commands_cannot_be_taken_by_plugins() -> None:
    assert "eval" not in cli.plugin_commands()
    help_text = cli.build_parser(["mcp"]).format_help()
    assert "mcp" in help_text and "eval" in help_text
