"""The Starlette application: the routes, the static files and the security middleware
around them all (see :mod:`hybrid_memory_ui.security`)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hybrid_memory import HybridMemory, HybridMemoryError, MemoryNotFoundError, StoreNotFoundError
from hybrid_memory_ui import actions, changes, pages, repeats, transfer
from hybrid_memory_ui.config import UIConfig
from hybrid_memory_ui.filters import FilterError
from hybrid_memory_ui.render import STATIC, Page, page_of
from hybrid_memory_ui.security import SecurityMiddleware


async def store_error(request: Request, exc: Exception) -> Response:
    """A store error no route handled (a namespace that does not exist, a memory deleted
    meanwhile, a namespace parameter that cannot be read): the page says so, in the
    site's frame."""
    status = 404 if isinstance(exc, (MemoryNotFoundError, StoreNotFoundError)) else 400
    return page_of(request).render(request, "error.html", status=status, error=str(exc))


def create_app(memory: HybridMemory, config: UIConfig | None = None) -> Starlette:
    """The page over ``memory`` (which the caller opens and closes)."""
    config = config or UIConfig()
    config.check()
    routes = [
        Route("/", pages.home),
        Route("/changes", pages.changes),
        Route("/memory", pages.memory_page),
        Route("/memory/delete", pages.delete_page),
        Route("/memory/similar", repeats.near_duplicates),
        Route("/memory/merge", repeats.merge_page),
        Route("/memory/merge", repeats.merge, methods=["POST"]),
        Route("/stats", pages.stats_page),
        Route("/tags", pages.tags_page),
        Route("/transfer", pages.transfer_page),
        Route("/export", transfer.export),
        Route("/login", pages.login_form),
        Route("/login", actions.login, methods=["POST"]),
        Route("/memory/add", actions.add, methods=["POST"]),
        Route("/memory/edit", actions.edit, methods=["POST"]),
        Route("/memory/delete", actions.delete, methods=["POST"]),
        Route("/bulk", changes.bulk, methods=["POST"]),
        Route("/tags/change", changes.tag_change, methods=["POST"]),
        Route("/import", transfer.import_file, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityMiddleware, config=config)],
        exception_handlers={HybridMemoryError: store_error, FilterError: store_error},
    )
    app.state.page = Page(memory, config)
    return app
