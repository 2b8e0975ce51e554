"""Streamable HTTP, safe by default.

- Binds 127.0.0.1 unless told otherwise; any other address needs a bearer token
  (:meth:`MCPServerSettings.check_http` refuses to start without one).
- With a token, every HTTP request must carry ``Authorization: Bearer <token>``
  (compared in constant time), else 401 with a JSON-RPC error saying what is missing,
  which MCP clients show as is (a plain 401 reaches users of the SDK's client as
  "Server returned an error response").
- DNS-rebinding protection (the SDK's ``TransportSecuritySettings``) is always on:
  a Host header other than the loopback names, the bound address and
  ``allowed_hosts`` gets 421; an Origin header other than the loopback origins and
  ``allowed_origins`` gets 403 (requests without an Origin, from non-browser
  clients, pass).
- Request bodies above ``max_body_bytes`` get 413 (the SDK's limit, set from ours).
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from hybrid_memory_mcp.settings import MCPServerSettings

__all__ = ["BearerTokenMiddleware", "build_http_app", "serve_http", "transport_security"]

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class BearerTokenMiddleware:
    """Refuses every HTTP request that does not carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("token must not be empty")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry: an HTTP request without the token is refused with 401."""
        if scope["type"] == "http":
            given = b""
            for key, value in scope.get("headers", ()):
                if key == b"authorization":
                    given = value
                    break
            if not hmac.compare_digest(given, self._expected):
                await _unauthorized(send, bool(given))
                return
        await self.app(scope, receive, send)


UNAUTHORIZED = -32001  # a JSON-RPC server error code: the request lacks valid credentials


async def _unauthorized(send: Send, token_given: bool) -> None:
    """401 with a JSON-RPC error body: clients surface its message to the user."""
    problem = "the bearer token is wrong" if token_given else "no bearer token was sent"
    message = (
        f"Unauthorized: {problem}. This hybrid-memory MCP server requires the header "
        "'Authorization: Bearer <token>' on every request, with the token the server was "
        "started with (HYBRID_MEMORY_MCP_TOKEN); set it in your client's headers."
    )
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": UNAUTHORIZED, "message": message}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"www-authenticate", b'Bearer realm="hybrid-memory"'),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def transport_security(settings: MCPServerSettings) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection for these settings: always on."""
    hosts = list(LOOPBACK_HOSTS)
    if settings.host not in ("0.0.0.0", "::"):
        bound = f"[{settings.host}]" if ":" in settings.host else settings.host
        hosts += [bound, f"{bound}:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts + list(settings.allowed_hosts),
        allowed_origins=LOOPBACK_ORIGINS + list(settings.allowed_origins),
    )


def build_http_app(server: MCPServer, settings: MCPServerSettings) -> ASGIApp:
    """The streamable-HTTP ASGI app of ``server`` with the checks above (raises
    :class:`hybrid_memory.InvalidInputError` for an unsafe configuration)."""
    settings.check_http()
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=settings.http_path,
        max_request_body_size=settings.max_body_bytes,
        transport_security=transport_security(settings),
        host=settings.host,
    )
    if settings.token is not None and settings.token.get_secret_value():
        app = BearerTokenMiddleware(app, settings.token.get_secret_value())
    return app


def serve_http(server: MCPServer, settings: MCPServerSettings, **uvicorn_options: Any) -> None:
    """Serve ``server`` over streamable HTTP until interrupted."""
    import uvicorn

    app = build_http_app(server, settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        **uvicorn_options,
    )
    uvicorn.Server(config).run()
