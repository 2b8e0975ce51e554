"""Opening only what exists (``HybridMemory(..., create=False)``,
``memory.namespace(name, create=False)``): what a read opens, so that a typo in a path, a
collection or a namespace is an error naming it, never a new empty store.

Checked before the store is opened: an embedded path must hold a Chroma database and the
collection must be one of its collections (asked of the path's owner when another
process holds it); a server must hold the collection. Nothing is created on the way: not
the directory, not Chroma's files, not the collection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hybrid_memory._model.errors import StoreError, StoreNotFoundError
from hybrid_memory._model.namespaces import PARTITION_SUFFIX, REGISTRY_SUFFIX
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._shared_path.ownership import acquire
from hybrid_memory._store.client import make_client

#: The file Chroma keeps an embedded store's catalogue in.
CHROMA_DATABASE = "chroma.sqlite3"


@contextlib.contextmanager
def existing_store(settings: HybridMemorySettings, client: Any) -> Iterator[None]:
    """Runs the block (the opening of the store) only if the store ``settings`` and
    ``client`` name exists; :class:`StoreNotFoundError` naming what is missing, else. For
    an embedded path, the path stays held while the block runs, so that the check and
    the opening share one owner and one Chroma client."""
    if client is not None:
        _check_collection(client, settings.collection, "the given client")
        yield
        return
    if settings.url:
        _check_collection(make_client(settings, attempts=3), settings.collection, settings.url)
        yield
        return
    path = settings.path
    if path is None:
        raise StoreNotFoundError(
            "path", "create=False needs a store that exists: give path=, url= or client="
        )
    folder = Path(path)
    if not folder.is_dir():
        raise StoreNotFoundError(
            path, f"no store at {path}: no such directory (nothing was created)"
        )
    if not holds_store(path):
        raise StoreNotFoundError(
            path,
            f"no store at {path}: the directory holds no hybrid-memory store (no "
            f"{CHROMA_DATABASE}; nothing was created)",
        )
    ownership = acquire(path, settings.request_timeout, settings.write_reserve)
    try:
        _check_collection(ownership.client(settings.request_timeout), settings.collection, path)
        yield
    finally:
        ownership.release()


def holds_store(path: str) -> bool:
    """Whether the directory ``path`` holds an embedded store (Chroma's database)."""
    return (Path(path) / CHROMA_DATABASE).is_file()


def _check_collection(client: Any, name: str, where: str) -> None:
    try:
        names = [str(c.name) for c in client.list_collections()]
    except Exception as exc:
        raise StoreError(f"could not list the collections of the store at {where}: {exc}") from exc
    if name in names:
        return
    stores = sorted(n for n in names if _is_store(n))
    listed = f"its collections: {', '.join(stores)}" if stores else "it holds none yet"
    raise StoreNotFoundError(
        name,
        f"no collection {name!r} in the store at {where} ({listed}; nothing was created)",
    )


def _is_store(name: str) -> bool:
    """Whether a Chroma collection is a store's own (not one a store keeps for its
    namespaces, nor an earlier version's namespace collection)."""
    return not name.endswith((PARTITION_SUFFIX, REGISTRY_SUFFIX)) and ".ns." not in name


def missing_namespace(name: str, names: list[str], where: tuple[str, ...]) -> StoreNotFoundError:
    """The error for namespace ``name``, not among ``names`` under ``where``."""
    under = " / ".join(where) if where else "this store"
    listed = f"its namespaces: {', '.join(names)}" if names else "it has none"
    return StoreNotFoundError(
        name, f"no namespace {name!r} under {under} ({listed}; nothing was created)"
    )
