"""Host names and addresses: whether one reaches this machine only."""

from __future__ import annotations

import ipaddress

#: Names that resolve to this machine only, besides the loopback addresses.
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) reaches
    this machine only: ``localhost``, ``127.0.0.0/8``, ``::1``.

    A server bound there is unreachable from the network, so it may skip what guards one
    that is not (a token, a list of allowed host names): the MCP server and the memory
    page both decide so with this function."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
