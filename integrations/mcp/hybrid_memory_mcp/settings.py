"""The MCP server's own settings, in one pydantic-settings class (``HYBRID_MEMORY_MCP_*``).

Where the memories live (path, Chroma URL, collection, search knobs) is configured by
the store's own ``HYBRID_MEMORY_*`` variables (:class:`hybrid_memory.HybridMemorySettings`);
this class holds only what the server adds: transport, HTTP binding and its safety
checks, and the optional namespace.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from hybrid_memory import InvalidInputError, is_loopback

ENV_PREFIX = "HYBRID_MEMORY_MCP_"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # 1 MiB: a memory text is at most 100,000 characters


class MCPServerSettings(BaseSettings):
    """Settings of the hybrid-memory MCP server. Each field is also read from the
    environment as ``HYBRID_MEMORY_MCP_<FIELD>`` (lists as JSON); arguments win."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0]) if first.get("loc") else "settings"
            message = first.get("msg", str(exc)).removeprefix("Value error, ")
            raise InvalidInputError(
                f"{ENV_PREFIX}{name.upper()} ({name})", f"{message}; got {first.get('input')!r}"
            ) from exc
        except SettingsError as exc:
            raise InvalidInputError(
                "settings", f"{exc}; list values are written as JSON, e.g. '[\"a.example\"]'"
            ) from exc

    transport: Literal["stdio", "streamable-http"] = Field(
        "stdio",
        description="stdio (what desktop and IDE clients launch) or streamable-http.",
    )
    host: str = Field(
        "127.0.0.1",
        description="Address the HTTP server binds to. Anything but a loopback address "
        "requires a token.",
    )
    port: int = Field(8765, ge=0, le=65535, description="HTTP port (0: any free port).")
    http_path: str = Field("/mcp", pattern=r"^/", description="URL path of the MCP endpoint.")
    token: SecretStr | None = Field(
        None,
        description="Bearer token every HTTP request must carry (Authorization: Bearer "
        "<token>). Optional on loopback, required on any other address.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values accepted besides the loopback names and the bound "
        "address ('name:*' allows any port). Needed when binding to 0.0.0.0 or ::.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origin header values accepted besides http://127.0.0.1, localhost and "
        "[::1] on any port ('http://name:*' allows any port). Requests without an Origin "
        "(non-browser clients) are always accepted; any other Origin gets 403.",
    )
    max_body_bytes: int = Field(
        DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        description="Largest HTTP request body accepted, in bytes; larger ones get 413.",
    )
    namespace: str | None = Field(
        None,
        min_length=1,
        description="Scope every tool to this namespace of the store (any non-empty string): "
        "its own memories and keyword index, so nothing outside it is read, found, "
        "counted or deleted, and its ids cannot collide with another namespace's.",
    )
    namespace_key: str = Field(
        "namespace",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$",
        description="The metadata field the earlier namespace scheme ('<namespace>:<id>' ids "
        "in the store itself) marked memories with: read once, to move those memories into "
        "the namespace.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "WARNING", description="Server log level (logs go to stderr)."
    )

    @field_validator("host")
    @classmethod
    def _host_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @property
    def loopback(self) -> bool:
        """Whether ``host`` only accepts connections from this machine."""
        return is_loopback(self.host)

    def check_http(self) -> None:
        """Refuse an HTTP configuration that is unsafe: a non-loopback bind without a
        token, or a wildcard bind with no allowed host names to check Host against."""
        if not self.loopback and (self.token is None or not self.token.get_secret_value()):
            raise InvalidInputError(
                f"{ENV_PREFIX}TOKEN (--token)",
                f"binding to {self.host!r} exposes the memory beyond this machine, so a bearer "
                "token is required: set HYBRID_MEMORY_MCP_TOKEN (or pass --token), or bind to "
                "127.0.0.1",
            )
        if self.host in ("0.0.0.0", "::") and not self.allowed_hosts:
            raise InvalidInputError(
                f"{ENV_PREFIX}ALLOWED_HOSTS (--allowed-host)",
                f"binding to {self.host!r} accepts any address, so name the Host header values "
                "clients will use (e.g. --allowed-host 'memory.internal:*'); requests with "
                "another Host are refused (DNS-rebinding protection)",
            )
