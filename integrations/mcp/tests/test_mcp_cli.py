"""``hybrid-memory mcp`` is found through the ``hybrid_memory.commands`` entry points,
the core never imports the plugin, a missing plugin prints its install line, and the
server's settings come from ``HYBRID_MEMORY_MCP_*``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _mcp_test_support import child_env
from hybrid_memory_mcp import MCPServerSettings
from hybrid_memory_mcp.cli import build_parser, settings_from

from hybrid_memory import InvalidInputError, cli


def test_the_plugin_registers_its_command() -> None:
    commands = cli.plugin_commands()
    assert commands["mcp"].value == "hybrid_memory_mcp.cli:run"
    assert commands["mcp"].group == cli.COMMANDS_GROUP == "hybrid_memory.commands"


def test_core_cli_imports_no_plugin() -> None:
    code = (
        "import sys, hybrid_memory, hybrid_memory.cli as c; "
        "c.build_parser(list(c.plugin_commands())); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('hybrid_memory_mcp', 'mcp')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_core_help_lists_the_plugin_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    assert "mcp" in capsys.readouterr().out


def test_missing_plugin_prints_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As if hybrid-memory-mcp were not installed: no entry point in the group.
    monkeypatch.setattr(cli, "plugin_commands", dict)
    assert cli.main(["mcp", "--transport", "stdio"]) == 2
    err = capsys.readouterr().err
    assert "pip install hybrid-memory-mcp" in err
    assert "pip install -e integrations/mcp" in err


def test_core_hands_the_arguments_to_the_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    # An unsafe bind is refused by the plugin before any store is opened: exit 2.
    status = cli.main(["mcp", "--transport", "streamable-http", "--host", "203.0.113.5"])
    assert status == 2
    assert "HYBRID_MEMORY_MCP_TOKEN" in capsys.readouterr().err


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_MCP_PORT", "9999")
    monkeypatch.setenv("HYBRID_MEMORY_MCP_TOKEN", "from-env")
    monkeypatch.setenv("HYBRID_MEMORY_MCP_ALLOWED_ORIGINS", '["https://app.example"]')
    monkeypatch.setenv("HYBRID_MEMORY_MCP_NAMESPACE", "team-a")
    settings = settings_from(build_parser().parse_args(["--port", "8000"]))
    assert settings.port == 8000  # the flag wins
    assert settings.token is not None and settings.token.get_secret_value() == "from-env"
    assert "from-env" not in repr(settings)  # the token is not printed
    assert settings.allowed_origins == ["https://app.example"]
    assert settings.namespace == "team-a"
    assert settings.host == "127.0.0.1" and settings.max_body_bytes == 1024 * 1024


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("HYBRID_MEMORY_MCP_PORT", "70000", "HYBRID_MEMORY_MCP_PORT"),
        ("HYBRID_MEMORY_MCP_TRANSPORT", "sse", "HYBRID_MEMORY_MCP_TRANSPORT"),
        ("HYBRID_MEMORY_MCP_MAX_BODY_BYTES", "10", "HYBRID_MEMORY_MCP_MAX_BODY_BYTES"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidInputError, match=named):
        MCPServerSettings()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("192.168.1.4", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert MCPServerSettings(host=host).loopback is loopback
