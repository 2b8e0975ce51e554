"""The reads a store open on an embedded path answers for a command line client, while
this process owns the path (:mod:`hybrid_memory._shared_path.reads`): the store's own
read methods, run on a view with the client's search settings, so that the answer is
the one the client would have computed by opening the store itself.

A store answers only a client it can stand in for: the same collection, the same
embedding (the client's ``--embedding-name``, or the default model the client's
settings name), and the same settings wherever a setting changes what a read returns
(the search settings are taken from the client; any other that differs sends the client
back to opening the store). Namespaces are opened with ``create=False``: a read for a
namespace that does not exist raises, and creates nothing.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

from hybrid_memory._embedding.embedders import resolve_embedding
from hybrid_memory._model.errors import HybridMemoryError, StoreError
from hybrid_memory._model.settings import SEARCH_SETTINGS, HybridMemorySettings
from hybrid_memory._shared_path import reads


class ServedStore(Protocol):
    """What the service needs of the store it answers with (a ``HybridMemory``; named by
    its surface, as the store imports this module)."""

    settings: HybridMemorySettings

    @property
    def embedder(self) -> Any: ...

    def sync(self) -> None: ...

    def with_settings(self, **overrides: Any) -> ServedStore: ...

    def namespace(self, name: str, *, create: bool = ...) -> ServedStore: ...


#: The store's methods a client may ask for: each only reads.
READ_METHODS = frozenset(
    {
        "search",
        "list_memories",
        "count",
        "get",
        "get_many",
        "existing",
        "tags",
        "stats",
        "namespaces",
    }
)
#: Settings that do not change what a read returns (where the store is, how it waits,
#: caches, how the model's files are found): a client may differ from the owner in them.
_NOT_READ = frozenset(
    {
        "path",
        "url",
        "request_timeout",
        "write_reserve",
        "index_path",
        "embedding_model_files",
        "embedding_model_url",
        "cache_dir",
        "embedding_batch_size",
        "query_cache_size",
        "tag_cache_ttl",
        "warm_in_background",
        "open_namespaces",
    }
)
_VIEWS_KEPT = 8

_client_environment: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "client_environment"
)


class _ClientEnvironment(EnvSettingsSource):
    """The client's ``HYBRID_MEMORY_*`` variables, read as this process's would be."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in _client_environment.get().items()}


class _ClientSettings(HybridMemorySettings):
    """Settings built from the client's environment and arguments, not this process's."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _ClientEnvironment(settings_cls))


def client_settings(environment: Mapping[str, str], **given: Any) -> HybridMemorySettings:
    """The settings a client process would build from ``environment`` (its
    ``HYBRID_MEMORY_*`` variables) and ``given`` (its command line's options)."""
    token = _client_environment.set(dict(environment))
    try:
        return _ClientSettings(**given)
    finally:
        _client_environment.reset(token)


class ReadService:
    """Answers the reads of command line clients with ``memory`` (a store on a path)."""

    def __init__(self, memory: ServedStore) -> None:
        self._memory = memory
        self._views: dict[tuple[Any, ...], ServedStore] = {}
        self._lock = threading.Lock()

    def __call__(self, request: Mapping[str, Any]) -> tuple[str, Any]:
        try:
            view = self._view(request)
        except _NotServed as why:
            return reads.NOT_SERVED, str(why)
        except HybridMemoryError as exc:
            return "raise", exc
        call = request.get("call")
        if call is None:
            return "ok", None
        method, args, kwargs = call
        if method not in READ_METHODS:
            return reads.NOT_SERVED, f"{method!r} is not a read this store serves"
        try:
            view.sync()  # what a client opening the store would see: every write so far
            return "ok", getattr(view, method)(*args, **kwargs)
        except HybridMemoryError as exc:
            return "raise", exc
        except Exception as exc:  # sent back as the store's failure, never as a hang
            return "raise", StoreError(f"{type(exc).__name__}: {exc}")

    def _view(self, request: Mapping[str, Any]) -> ServedStore:
        """The view the client would have opened: the store with the client's search
        settings, then its namespace (which must exist)."""
        memory = self._memory
        given: dict[str, Any] = {"path": memory.settings.path}
        if request.get("collection"):
            given["collection"] = request["collection"]
        environment = {
            k: v
            for k, v in dict(request.get("environment") or {}).items()
            if k.upper() not in ("HYBRID_MEMORY_PATH", "HYBRID_MEMORY_URL")
        }
        try:
            wanted = client_settings(environment, **given)
        except (HybridMemoryError, ValueError) as exc:
            raise _NotServed(f"the client's settings: {exc}") from None
        own = memory.settings
        if wanted.collection != own.collection:
            raise _NotServed(f"collection {wanted.collection!r} is not open here")
        differ = sorted(
            name
            for name in type(own).model_fields
            if name not in _NOT_READ | SEARCH_SETTINGS
            and getattr(wanted, name) != getattr(own, name)
        )
        if differ:
            raise _NotServed(f"the client's settings differ: {', '.join(differ)}")
        name = request.get("embedding_name")
        if name is None:
            if request.get("custom_embedding"):
                raise _NotServed("the client names its own embedding, without a name")
            name = resolve_embedding(None, wanted).name
        if name != memory.embedder.name:
            raise _NotServed(f"the client embeds with {name!r}, this store with another")
        search = {field: getattr(wanted, field) for field in sorted(SEARCH_SETTINGS)}
        key = tuple((field, repr(value)) for field, value in search.items())
        with self._lock:
            view = self._views.get(key)
            if view is None:
                if len(self._views) >= _VIEWS_KEPT:
                    self._views.clear()
                view = self._views[key] = memory.with_settings(**search)
        for namespace in request.get("namespace") or ():
            view = view.namespace(namespace, create=False)
        return view


class _NotServed(Exception):
    """This store cannot stand in for the client: it opens the store itself."""


def serve_reads(memory: ServedStore) -> ReadService | None:
    """Register ``memory`` (a store on an embedded path) to answer command line reads
    while this process owns the path; None for any other store."""
    path = memory.settings.path
    if path is None:
        return None
    service = ReadService(memory)
    reads.register(path, service)
    return service


def stop_serving(memory: ServedStore, service: ReadService | None) -> None:
    if service is not None and memory.settings.path is not None:
        reads.unregister(memory.settings.path, service)
