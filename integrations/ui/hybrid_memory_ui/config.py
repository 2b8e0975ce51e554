"""What the page is allowed to do and who may reach it: the server's options, checked
before anything is served."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybrid_memory import is_loopback

#: The environment variable holding the token (required off loopback).
TOKEN_VARIABLE = "HYBRID_MEMORY_UI_TOKEN"
#: Where nothing but this machine can connect from.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


class UnsafeConfigError(ValueError):
    """A configuration the server refuses to start with."""


@dataclass(frozen=True)
class UIConfig:
    """The page's options.

    ``host``: the address the server binds to. ``token``: required on every request when
    set; must be set when ``host`` is not loopback. ``allowed_hosts``: ``Host`` header
    names accepted besides the loopback names and ``host`` itself (a server reached by
    another name). ``read_only``: no page offers a write and every write is refused.
    ``poll_seconds``: how often an open page asks whether the store changed.
    """

    host: str = "127.0.0.1"
    port: int = 8777
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    read_only: bool = False
    poll_seconds: float = 2.0
    page_sizes: tuple[int, ...] = field(default=(20, 50, 100))

    def check(self) -> None:
        """Refuse a bind off loopback without a token (anyone on the network could read
        and change every memory)."""
        if not is_loopback(self.host) and not self.token:
            raise UnsafeConfigError(
                f"--host {self.host!r} is not a loopback address: set {TOKEN_VARIABLE} "
                "(a long random string) so that only people holding it can use the page, "
                "or bind to 127.0.0.1"
            )
        if not 0 <= self.port <= 65535:
            raise UnsafeConfigError(f"--port: expected 0..65535, got {self.port}")
        if self.poll_seconds <= 0:
            raise UnsafeConfigError(f"poll_seconds: expected > 0, got {self.poll_seconds}")

    def host_names(self) -> frozenset[str]:
        """The ``Host`` header names (without port) this server answers to."""
        names = {"localhost", "127.0.0.1", "::1", *(h.lower() for h in self.allowed_hosts)}
        if self.host not in WILDCARD_HOSTS:
            names.add(self.host.strip("[]").lower())
        return frozenset(names)
