"""How a :class:`~hybrid_memory.HybridMemory` opens its store, and what its views stand on:
a namespace's share of the store (:meth:`HybridMemory.namespace`), or the store under other
search settings (:meth:`HybridMemory.with_settings`). Each comes as settings and a handle
on parts, which the store and its views wrap."""

from __future__ import annotations

import contextlib
from os import PathLike
from typing import Any

from hybrid_memory._memory.existing import existing_store, missing_namespace
from hybrid_memory._memory.parts import NamespaceHandle, StoreHandle, StoreParts
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.namespaces import valid_namespace
from hybrid_memory._model.settings import SEARCH_SETTINGS, HybridMemorySettings, load_settings


def open_store(
    path: str | PathLike[str] | None,
    url: str | None,
    client: Any,
    collection: str | None,
    embedding: Any,
    embedding_name: str | None,
    settings: HybridMemorySettings | None,
    create: bool,
    overrides: dict[str, Any],
) -> tuple[HybridMemorySettings, StoreHandle | NamespaceHandle]:
    """The settings and the parts of a store opened as ``HybridMemory(...)`` was asked,
    its keyword index checked against its collection (the handle's type is that of every
    view's too)."""
    if client is not None and (path is not None or url is not None):
        raise InvalidInputError("client", "pass either client, or path/url, not both")
    if path is not None:
        overrides["path"] = str(path)
    if url is not None:
        overrides["url"] = url
    if collection is not None:
        overrides["collection"] = collection
    loaded = load_settings(settings, **overrides)
    if not isinstance(create, bool):
        raise InvalidInputError("create", f"expected True or False, got {create!r}")
    with existing_store(loaded, client) if not create else contextlib.nullcontext():
        parts = StoreParts(loaded, client, embedding, embedding_name)
    # On open, compare ids too: an add and a delete made behind the index's back
    # (a crash, another tool) can leave the counts equal. An index kept in a cache
    # for a server store does that in the background: the ids of a large store
    # are many requests to the server, and the open catches up on its watermark.
    try:
        parts.sync.open(reconcile=parts.server is None, warm_above=loaded.warm_in_background)
    except BaseException:
        parts.close()
        raise
    return loaded, StoreHandle(parts)


def namespace_view(
    settings: HybridMemorySettings,
    handle: StoreHandle | NamespaceHandle,
    name: str,
    create: bool = True,
) -> tuple[HybridMemorySettings, NamespaceHandle]:
    """The settings and the handle of namespace ``name`` of a store or view, its parts
    opened (the namespace's index checked against its share) on first use; with
    ``create=False``, only of a namespace that exists."""
    name = valid_namespace(name)
    if not create:
        names = handle.parts().namespace_names()
        if name not in names:
            raise missing_namespace(name, names, handle.parts().namespace_path)
    namespace = NamespaceHandle(handle, name)
    parts = namespace.parts()
    # A copy, not a new validation (which re-reads the environment): both values were
    # validated when the namespace's parts were built from them.
    copied = settings.model_copy(
        update={
            "collection": parts.settings.collection,
            "index_path": parts.settings.index_path,
        }
    )
    return copied, namespace


def search_settings_view(
    settings: HybridMemorySettings, overrides: dict[str, Any]
) -> HybridMemorySettings:
    """``settings`` with other search settings; any other setting is refused, naming the
    search settings that can change."""
    wrong = sorted(set(overrides) - SEARCH_SETTINGS)
    if wrong:
        raise InvalidInputError(
            "with_settings",
            f"{', '.join(wrong)} cannot change on an open store; search settings that can: "
            f"{', '.join(sorted(SEARCH_SETTINGS))}",
        )
    return load_settings(settings, **overrides)


def described(settings: HybridMemorySettings, parts: StoreParts) -> str:
    """The ``repr`` of a store or view: where it lives, its collection, its namespace."""
    where = settings.url or settings.path or "in-memory"
    path = parts.namespace_path
    scoped = f", namespace={path!r}" if path else ""
    return f"HybridMemory({where!r}, collection={parts.collection.name!r}{scoped})"
