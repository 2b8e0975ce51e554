"""What every route needs to answer: the store, the options and the templates (with
autoescape on: every text, tag and metadata value goes into a page as text)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from hybrid_memory import HybridMemory
from hybrid_memory_ui.config import UIConfig
from hybrid_memory_ui.filters import namespace_label
from hybrid_memory_ui.store import PageStore
from hybrid_memory_ui.uploads import UploadStash

STATIC = Path(__file__).parent / "static"
#: The vendored htmx (unmodified, from the npm package htmx.org) and its licence.
HTMX = "htmx-2.0.11.min.js"


def format_time(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_value(value: Any) -> str:
    """A metadata value as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def query_string(**params: Any) -> str:
    """``a=1&b=x`` of the ``params`` that have a value."""
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("hybrid_memory_ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        auto_reload=False,  # the templates ship in the package: no stat() per render
        lstrip_blocks=True,
    )
    env.filters["time"] = format_time
    env.filters["value"] = format_value
    env.filters["nslabel"] = namespace_label
    env.globals["htmx"] = HTMX
    env.globals["qs"] = query_string
    return env


class Page:
    """What every route needs: the store, the options, the templates."""

    def __init__(self, memory: HybridMemory, config: UIConfig) -> None:
        self.store = PageStore(memory)
        self.config = config
        self.env = templates()
        self.uploads = UploadStash()  # imports waiting for their confirmation

    def render(
        self, request: Request, name: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        context.setdefault("ns", request.query_params.get("ns", ""))
        context.update(request=request, config=self.config, root=self.store.root)
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status)


def page_of(request: Request) -> Page:
    page: Page = request.app.state.page
    return page
