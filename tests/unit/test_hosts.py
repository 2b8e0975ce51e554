"""``is_loopback``: the one check of the MCP server and the memory page for a bind that
only this machine can reach."""

from __future__ import annotations

import pytest

from hybrid_memory import is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("LocalHost", True),
        ("ip6-localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.5", False),
        ("memory.internal", False),
        ("localhost.example.com", False),
        ("128.0.0.1", False),
    ],
)
def test_only_this_machine_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
