"""Who may use the page, as one ASGI middleware in front of every route.

In this order, before any route runs:

1. the ``Host`` header must name this server (loopback, the bound address, or an
   ``--allowed-host``): a page of another site whose name was re-pointed at this machine
   (DNS rebinding) gets 403;
2. a write (anything but GET, HEAD and OPTIONS) must come from this server's own pages:
   its ``Origin`` (or, without one, its ``Referer``) must be this server's origin, or 403
   (cross-site request forgery), and nothing changes;
3. with a token, every request must carry it: ``Authorization: Bearer <token>`` or the
   cookie the login form sets (HttpOnly, SameSite=Strict); a page asked for without it
   is sent to the login form, anything else gets 401;
4. ``--read-only``: every write is refused with 403.

Every response also carries headers that keep the browser strict: a Content Security
Policy allowing this server's own scripts and styles only (no inline script runs, even
if some text escaped its escaping), no framing, no MIME sniffing.
"""

from __future__ import annotations

import hmac
from urllib.parse import quote, urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hybrid_memory_ui.config import UIConfig

#: The cookie the login form sets.
TOKEN_COOKIE = "hybrid_memory_ui_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Paths reachable without the token: the login form and the page's script and style.
OPEN_PATHS = ("/login", "/static/")
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


def host_name(host_header: str) -> str:
    """The name part of a ``Host`` header value (``[::1]:8777`` -> ``::1``)."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def same_origin(headers: Headers) -> bool:
    """Whether a write comes from a page of this very server: its ``Origin``, else its
    ``Referer``'s origin, is ``http(s)://<Host>`` (either scheme: behind a TLS proxy the
    page is https while the request reaching this server is http). Neither header:
    refused (browsers send ``Origin`` with every form post; a script without it is not a
    page of ours)."""
    own = headers.get("host", "").lower()
    origin = headers.get("origin")
    if origin is None:
        origin = headers.get("referer")
        if not origin:
            return False
    parts = urlsplit(origin.lower())
    return parts.scheme in ("http", "https") and bool(own) and parts.netloc == own


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def request_token(request: Request) -> str | None:
    """The token a request carries: its bearer header, else its cookie."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.cookies.get(TOKEN_COOKIE)


class SecurityMiddleware:
    """The checks above, for every HTTP request to ``app``."""

    def __init__(self, app: ASGIApp, config: UIConfig) -> None:
        self.app = app
        self.config = config
        self.hosts = config.host_names()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, _with_headers(send))
            return
        await self.app(scope, receive, _with_headers(send))

    def refusal(self, request: Request) -> Response | None:
        """The response that refuses ``request``, or None when it may go on."""
        headers, method, path = request.headers, request.method, request.url.path
        host = headers.get("host")
        if host is None or host_name(host) not in self.hosts:
            return PlainTextResponse(
                "403: this server does not answer to that Host name", status_code=403
            )
        writing = method not in SAFE_METHODS
        if writing and not same_origin(headers):
            return PlainTextResponse(
                "403: writes are accepted from this server's own pages only "
                "(the request's Origin or Referer is another site, or missing)",
                status_code=403,
            )
        token = self.config.token
        if (
            token
            and not path.startswith(OPEN_PATHS)
            and not token_matches(request_token(request), token)
        ):
            if method in ("GET", "HEAD") and "text/html" in headers.get("accept", ""):
                target = path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
            return PlainTextResponse(
                "401: this page needs its token (Authorization: Bearer <token>, or log in "
                "at /login)",
                status_code=401,
                headers={"www-authenticate": "Bearer"},
            )
        if writing and self.config.read_only and path != "/login":
            return PlainTextResponse(
                "403: this page was started with --read-only; nothing can be changed here",
                status_code=403,
            )
        return None


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message.setdefault("headers", [])
            message["headers"] = [*message["headers"], *SECURITY_HEADERS]
        await send(message)

    return sending
