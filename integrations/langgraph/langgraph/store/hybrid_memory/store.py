"""``HybridMemoryStore``: a LangGraph ``BaseStore`` whose items are hybrid-memory memories.

One LangGraph item is one memory:

- its id is derived from the namespace and key (a hash), so a second ``put`` of the
  same key replaces the memory (an upsert), never adds a copy;
- the namespace is metadata: the whole of it as JSON (``lg_namespace``), its depth
  (``lg_depth``), each label by position from the start (``lg_ns_0``, ``lg_ns_1``, ...)
  and from the end (``lg_nsr_0`` is the last label), so namespace prefixes, suffixes
  and wildcards are filters the engine applies before any cut;
- the value is kept whole as JSON text in ``lg_value`` (the engine's metadata takes
  only scalars and lists, so JSON is the lossless encoding), and each top-level
  scalar field of it also as ``lgv:<field>``, so a LangGraph ``filter`` on those
  fields becomes an engine filter;
- the memory's text (what the vector and keyword legs search) is the value's fields
  chosen by the put's ``index`` or the store's ``index={"fields": [...]}`` (default:
  the whole value as JSON); ``index=False`` stores the item as not searchable by
  text (``lg_indexed`` is False, and searches with a query leave it to the end).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from os import PathLike
from typing import Any, TypedDict, cast

from hybrid_memory import (
    HybridMemory,
    InvalidInputError,
    Memory,
    MissingDependencyError,
)

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )
    from langgraph.store.base.batch import AsyncBatchedBaseStore
    from langgraph.store.base.embed import ensure_embeddings
except ImportError as exc:  # pragma: no cover - langgraph is a declared dependency
    raise MissingDependencyError("langgraph", "langgraph-store-hybrid-memory") from exc

__all__ = ["AsyncHybridMemoryStore", "HybridIndexConfig", "HybridMemoryStore"]

# Metadata keys of a stored item (see the module docstring).
ITEM = "lg_item"
KEY = "lg_key"
NAMESPACE = "lg_namespace"
DEPTH = "lg_depth"
VALUE = "lg_value"
INDEXED = "lg_indexed"
UPDATED = "lg_updated_at"
HAS_TTL = "lg_has_ttl"
TTL_MINUTES = "lg_ttl"
EXPIRES = "lg_expires_at"
VALUE_FIELD = "lgv:"

FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_ORDER_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
_INT64 = range(-(2**63), 2**63)


def label_key(position: int) -> str:
    """The metadata key of a namespace's label at ``position`` from the start."""
    return f"lg_ns_{position}"


def label_from_end_key(position: int) -> str:
    """The metadata key of a namespace's label at ``position`` from the end (0: last)."""
    return f"lg_nsr_{position}"


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The memory id of the item at ``namespace``/``key``: stable across processes."""
    path = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return "lg-" + hashlib.sha256(path.encode("utf-8")).hexdigest()


class HybridIndexConfig(TypedDict, total=False):
    """How items are made searchable by text, LangGraph's ``IndexConfig``: ``fields``
    are LangGraph JSON paths (``"text"``, ``"meta.title"``, ``"notes[*].body"``; ``"$"``
    is the whole value, the default; ``text_fields`` is accepted as the SQLite store's
    name for them). ``embed`` is the embedding (a LangChain ``Embeddings``, a function of
    a list of texts, or a ``"provider:model"`` string as in LangGraph), default the
    :class:`~hybrid_memory.HybridMemory`'s own; ``dims`` its dimension, checked to be
    a positive integer and otherwise informative (Chroma learns it from the vectors);
    ``distance_type`` only ``"cosine"``, the one the vector leg uses."""

    fields: list[str] | None
    text_fields: list[str] | None
    embed: Any
    dims: int
    distance_type: str


class HybridMemoryStore(BaseStore):
    """A LangGraph store backed by :class:`hybrid_memory.HybridMemory`: ``get``,
    ``put``, ``delete``, ``search`` (hybrid vector + BM25 + tag search with a
    ``query``, a listing without one), ``list_namespaces``, their async forms, and TTL.

    Example (runs as written; the first put loads the embedding model)::

        from langgraph.store.hybrid_memory import HybridMemoryStore

        store = HybridMemoryStore(path="./memory")
        store.put(("users", "alice"), "theme", {"text": "Alice prefers dark mode"})
        store.search(("users", "alice"), query="what theme does alice like?")
        graph = builder.compile(store=store)    # nodes take `store: BaseStore`

    Args:
        memory: a ready :class:`HybridMemory` (not closed by :meth:`close`). Exclusive
            with ``path`` and ``memory_options``.
        path: a directory for an embedded, persistent store (neither: in memory).
        index: LangGraph's index configuration (:class:`HybridIndexConfig`):
            ``{"fields": [...]}``, what part of a value is searchable by text (default
            the whole value), and optionally ``embed``/``dims`` (the embedding, when
            not the memory's default). Kept as :attr:`index_config`.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes`` for :meth:`start_ttl_sweeper`).
        **memory_options: passed to ``HybridMemory(...)`` (``url``, ``collection``,
            ``embedding``, settings fields...).

    Reads never return an expired item (as with ``omit_expired``); expired items are
    deleted by :meth:`sweep_ttl` or the sweeper thread.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: HybridMemory | None = None,
        *,
        path: str | PathLike[str] | None = None,
        index: HybridIndexConfig | None = None,
        ttl: TTLConfig | None = None,
        **memory_options: Any,
    ) -> None:
        if memory is not None and (path is not None or memory_options):
            raise InvalidInputError(
                "memory", "pass either memory, or path/HybridMemory options, not both"
            )
        self.index_config: IndexConfig | None = _index_config(index)
        self._fields = _index_fields(self.index_config)
        self.ttl_config = _ttl_config(ttl)
        embed = (self.index_config or {}).get("embed")
        if embed is not None:
            if memory is not None or "embedding" in memory_options:
                raise InvalidInputError(
                    "index.embed",
                    "the store embeds with the HybridMemory's embedding: pass embed, or "
                    "memory=/embedding=, not both",
                )
            memory_options["embedding"] = ensure_embeddings(embed)
        #: the index's embedding as LangChain ``Embeddings`` (None without ``index.embed``)
        self.embeddings = memory_options.get("embedding") if embed is not None else None
        self._owns_memory = memory is None
        self._warm = False
        self.memory = memory if memory is not None else HybridMemory(path, **memory_options)
        self._lock = threading.RLock()
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    # --- BaseStore ---------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations; reads see the store as it was before the batch's writes,
        and of several puts of one key the last wins (as in LangGraph's own stores).
        Every operation is checked first: a bad one raises and nothing is written."""
        op_list = [_tuple_namespace(op) for op in ops]
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for position, op in enumerate(op_list):
            _check_op(op, position)
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
        prepared = [self._prepare_put(op) for op in puts.values()]
        results: list[Result] = [None] * len(op_list)
        with self._lock:
            now = _now()
            refresh: dict[str, Memory] = {}
            gets = [(i, op) for i, op in enumerate(op_list) if isinstance(op, GetOp)]
            if gets:
                self._get(gets, results, refresh, now)
            for i, op in enumerate(op_list):
                if isinstance(op, SearchOp):
                    results[i] = self._search(op, refresh, now)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op, now)
            self._refresh_ttl(refresh, now)
            if prepared:
                self._warm_up()
                self._write(prepared, _now())
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread: the embedding and Chroma calls never block
        the event loop."""
        return await asyncio.to_thread(self.batch, list(ops))

    # --- reads -------------------------------------------------------------------------

    def _get(
        self,
        gets: list[tuple[int, GetOp]],
        results: list[Result],
        refresh: dict[str, Memory],
        now: float,
    ) -> None:
        wanted = {item_id(op.namespace, op.key) for _, op in gets}
        found = {
            str(m.metadata[ITEM]): m
            for m in self.memory.list_memories(
                _all_of({ITEM: {"$in": sorted(wanted)}}, _alive(now))
            )
        }
        for i, op in gets:
            memory = found.get(item_id(op.namespace, op.key))
            if memory is None:
                continue
            results[i] = _item(memory)
            if op.refresh_ttl and memory.metadata.get(HAS_TTL):
                refresh[memory.id] = memory

    def _search(self, op: SearchOp, refresh: dict[str, Memory], now: float) -> list[SearchItem]:
        pushed, residual = translate_filter(op.filter)
        scope = _all_of(_prefix_filter(op.namespace_prefix), _alive(now), *pushed)
        found: list[tuple[Memory, float | None]]
        if not op.query:
            if residual:
                listed = [m for m in self.memory.list_memories(scope) if _passes(m, residual)]
                page = listed[op.offset : op.offset + op.limit]
            else:
                page = self.memory.list_memories(scope, limit=op.limit, offset=op.offset)
            found = [(m, None) for m in page]
        else:
            found = self._query(op, scope, residual)
        if op.refresh_ttl:
            refresh.update((m.id, m) for m, _ in found if m.metadata.get(HAS_TTL))
        return [cast(SearchItem, _item(m, search=True, score=score)) for m, score in found]

    def _query(
        self, op: SearchOp, scope: dict[str, Any], residual: dict[str, Any]
    ) -> list[tuple[Memory, float | None]]:
        """Hybrid search over the indexed items in scope, best first, followed (as
        LangGraph's InMemoryStore does) by the items in scope stored with
        ``index=False``, unscored, oldest first; ``offset``/``limit`` page through
        that one sequence."""
        indexed = _all_of(scope, {INDEXED: True})
        unindexed_memories: list[Memory] | None = None
        if residual:
            # A condition the engine cannot test (a nested value, say): the items
            # passing the whole filter are found first, and the search is restricted
            # to them, so no result is lost to the search's cut.
            passing = [m for m in self.memory.list_memories(scope) if _passes(m, residual)]
            indexed_ids = [m.id for m in passing if m.metadata.get(INDEXED)]
            indexed = _all_of(scope, {ITEM: {"$in": indexed_ids or [""]}})
            unindexed_memories = [m for m in passing if not m.metadata.get(INDEXED)]
            total = len(indexed_ids)
        else:
            total = self.memory.count(indexed)
        wanted = min(op.offset + op.limit, total)
        found: list[tuple[Memory, float | None]] = []
        if wanted > op.offset:
            memory = self.memory
            if wanted > memory.settings.max_k:
                memory = memory.with_settings(max_k=wanted)
            hits = memory.search(cast(str, op.query), k=wanted, filter=indexed)
            scores = langgraph_scores(hits)
            found = [(hit.memory, score) for hit, score in zip(hits, scores, strict=True)]
            found = found[op.offset :]
        missing = op.limit - len(found)
        if missing <= 0:
            return found
        skip = max(0, op.offset - total)
        if unindexed_memories is None:
            unindexed = _all_of(scope, {INDEXED: False})
            rest = self.memory.list_memories(unindexed, limit=missing, offset=skip)
        else:
            rest = unindexed_memories[skip : skip + missing]
        return found + [(m, None) for m in rest]

    def _list_namespaces(self, op: ListNamespacesOp, now: float) -> list[tuple[str, ...]]:
        clauses: list[dict[str, Any]] = [_alive(now), {DEPTH: {"$gte": 1}}]
        for condition in op.match_conditions or ():
            clauses.append(_match_filter(condition))
        namespaces = {
            tuple(json.loads(str(m.metadata[NAMESPACE])))
            for m in self.memory.list_memories(_all_of(*clauses))
        }
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # --- TTL ---------------------------------------------------------------------------

    def _refresh_ttl(self, refresh: Mapping[str, Memory], now: float) -> None:
        """Push back the expiry of the items just read that have a TTL (their
        ``updated_at`` stays: reading is not an update)."""
        for memory_id, memory in refresh.items():
            metadata = dict(memory.metadata)
            minutes = float(metadata[TTL_MINUTES])
            metadata[EXPIRES] = now + minutes * 60.0
            self.memory.update(memory_id, metadata=metadata)

    def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        with self._lock:
            expired = {"$and": [{HAS_TTL: True}, {EXPIRES: {"$lte": _now()}}]}
            return self.memory.delete(filter=expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5) in a daemon thread, until :meth:`stop_ttl_sweeper`."""
        minutes = _sweep_minutes(sweep_interval_minutes, self.ttl_config)
        if self._sweeper is not None and self._sweeper.is_alive():
            return
        self._sweeper_stop.clear()

        def sweep() -> None:
            while not self._sweeper_stop.wait(minutes * 60.0):
                try:
                    self.sweep_ttl()
                except Exception:  # a failed sweep is retried at the next interval
                    continue

        self._sweeper = threading.Thread(target=sweep, daemon=True, name="hybrid-memory-ttl")
        self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True once it has stopped (or none ran)."""
        if self._sweeper is None:
            return True
        self._sweeper_stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    # --- writes ------------------------------------------------------------------------

    def _prepare_put(self, op: PutOp) -> tuple[PutOp, str, str | None, dict[str, Any] | None]:
        """``(op, memory id, text, metadata)``, text and metadata None for a delete.
        Validates the value and index (every put of a batch before any is written)."""
        memory_id = item_id(op.namespace, op.key)
        if op.value is None:
            return op, memory_id, None, None
        value = op.value
        try:
            encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                "value", f"must be JSON-serialisable (str keys, finite numbers): {exc}"
            ) from exc
        paths = self._fields if op.index is None else op.index
        texts: list[str] = []
        if paths is not False:
            for path in paths:
                for text in get_text_at_path(value, "$" if path == "$" else tokenize_path(path)):
                    if text.strip():
                        texts.append(text)
        indexed = bool(texts)
        # The text of an unsearchable item is never matched (searches leave lg_indexed
        # False to the end), but the engine wants one: the item's path.
        text = "\n".join(texts) if indexed else "/".join((*op.namespace, op.key))
        text = text[: self.memory.settings.max_text_length]
        metadata: dict[str, Any] = {
            ITEM: memory_id,
            KEY: op.key,
            NAMESPACE: json.dumps(list(op.namespace), ensure_ascii=False),
            DEPTH: len(op.namespace),
            VALUE: encoded,
            INDEXED: indexed,
            HAS_TTL: op.ttl is not None,
        }
        for position, label in enumerate(op.namespace):
            metadata[label_key(position)] = label
        for position, label in enumerate(reversed(op.namespace)):
            metadata[label_from_end_key(position)] = label
        if op.ttl is not None:
            metadata[TTL_MINUTES] = float(op.ttl)
        for field, field_value in value.items():
            scalar = _engine_scalar(field_value)
            if scalar is not None:
                metadata[VALUE_FIELD + field] = scalar
        return op, memory_id, text, metadata

    def _warm_up(self) -> None:
        """Load the embedding model before the first write: an item's TTL counts from
        its write, and a model loading inside it (a second or more) would eat a short
        TTL before the item is even stored."""
        if not self._warm:
            self.memory.embedder.embed_query("warm up")
            self._warm = True

    def _write(
        self, prepared: list[tuple[PutOp, str, str | None, dict[str, Any] | None]], now: float
    ) -> None:
        ids = [memory_id for _, memory_id, _, _ in prepared]
        # Asked of the collection (the core's one door), so another process's put counts.
        existing = self.memory.existing(ids) if ids else set()
        deletes = [memory_id for op, memory_id, _, _ in prepared if op.value is None]
        gone = [i for i in deletes if i in existing]
        if gone:
            self.memory.delete(gone)
        items: list[dict[str, Any]] = []
        for position, (op, memory_id, text, metadata) in enumerate(prepared):
            if text is None or metadata is None:
                continue
            metadata[UPDATED] = now
            if op.ttl is not None:
                metadata[EXPIRES] = now + float(op.ttl) * 60.0
            item: dict[str, Any] = {"text": text, "id": memory_id, "metadata": metadata}
            if memory_id not in existing:
                # A new item's creation time, a microsecond apart within a batch, keeps
                # the batch's order in listings (oldest first).
                item["created_at"] = now + position * 1e-6
            items.append(item)
        if items:
            self.memory.add_many(items, upsert=True)

    # --- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop the TTL sweeper and close the memory this store opened."""
        self.stop_ttl_sweeper()
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> HybridMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HybridMemoryStore({self.memory!r})"


class AsyncHybridMemoryStore(AsyncBatchedBaseStore):
    """:class:`HybridMemoryStore` for asyncio code, as LangGraph's async stores are.

    Concurrent ``aput``/``aget``/``asearch``/... calls made in one event-loop tick are
    gathered into one batch (LangGraph's ``AsyncBatchedBaseStore``), so a burst of puts
    is one ``add_many``: one embedding call and one collection write. The TTL methods
    are coroutines (``await store.sweep_ttl()``, ``await store.start_ttl_sweeper()``,
    ``await store.stop_ttl_sweeper()``). The synchronous methods work from other
    threads; in the event loop's own thread they raise ``asyncio.InvalidStateError``,
    as in LangGraph. Create it inside a running event loop::

        async with AsyncHybridMemoryStore(path="./memory") as store:
            await store.aput(("users", "alice"), "theme", {"text": "dark mode"})

    Takes the arguments of :class:`HybridMemoryStore`; ``store.sync`` is that store.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: HybridMemory | None = None,
        *,
        path: str | PathLike[str] | None = None,
        index: HybridIndexConfig | None = None,
        ttl: TTLConfig | None = None,
        **memory_options: Any,
    ) -> None:
        super().__init__()
        self.sync = HybridMemoryStore(memory, path=path, index=index, ttl=ttl, **memory_options)
        self.memory = self.sync.memory
        self.index_config = self.sync.index_config
        self.ttl_config = self.sync.ttl_config
        self._sweeper_task: asyncio.Task[None] | None = None
        self._sweeper_stop: asyncio.Event | None = None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`HybridMemoryStore.batch` in a worker thread."""
        return await asyncio.to_thread(self.sync.batch, list(ops))

    async def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        return await asyncio.to_thread(self.sync.sweep_ttl)

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5) in a task of this event loop, until :meth:`stop_ttl_sweeper`;
        returns the task (the one already running, if any)."""
        minutes = _sweep_minutes(sweep_interval_minutes, self.ttl_config)
        if self._sweeper_task is not None and not self._sweeper_task.done():
            return self._sweeper_task
        stop = self._sweeper_stop = asyncio.Event()

        async def sweep() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), minutes * 60.0)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    await self.sweep_ttl()
                except Exception:  # a failed sweep is retried at the next interval
                    continue

        self._sweeper_task = asyncio.create_task(sweep(), name="hybrid-memory-ttl")
        return self._sweeper_task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper task; True once it has stopped (or none ran)."""
        task = self._sweeper_task
        if task is None:
            return True
        if self._sweeper_stop is not None:
            self._sweeper_stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            return False
        self._sweeper_task = None
        return True

    async def aclose(self) -> None:
        """Stop the TTL sweeper and close the memory this store opened."""
        await self.stop_ttl_sweeper()
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncHybridMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncHybridMemoryStore({self.memory!r})"


def _sweep_minutes(given: float | None, ttl_config: TTLConfig | None) -> float:
    interval = given or (ttl_config or {}).get("sweep_interval_minutes")
    minutes = float(interval or 5)
    if not minutes > 0:
        raise InvalidInputError("sweep_interval_minutes", f"expected > 0, got {interval!r}")
    return minutes


# --- checking what LangGraph hands over -----------------------------------------------------


_INDEX_KEYS = ("fields", "text_fields", "embed", "dims", "distance_type")


def _index_config(index: Any) -> IndexConfig | None:
    """The checked index configuration, as given (a copy); None without one."""
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise InvalidInputError(
            "index", f"expected a dict such as {{'fields': ['text']}}, got {index!r}"
        )
    unknown = sorted(set(index) - set(_INDEX_KEYS))
    if unknown:
        raise InvalidInputError(
            "index", f"unknown keys {unknown}; allowed: {', '.join(_INDEX_KEYS)}"
        )
    for name in ("fields", "text_fields"):
        if index.get(name) is not None:
            _index_paths(index[name], f"index.{name}")
    if "fields" in index and "text_fields" in index:
        raise InvalidInputError("index", "give fields or text_fields (the same thing), not both")
    dims = index.get("dims")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
        raise InvalidInputError("index.dims", f"expected a positive integer, got {dims!r}")
    distance = index.get("distance_type", "cosine")
    if distance != "cosine":
        raise InvalidInputError(
            "index.distance_type", f"only 'cosine' (the vector leg's), got {distance!r}"
        )
    return cast(IndexConfig, dict(index))


def _index_fields(index: Mapping[str, Any] | None) -> list[str]:
    fields = None if index is None else index.get("fields", index.get("text_fields"))
    if fields is None:
        return ["$"]
    return list(fields)


def _index_paths(paths: Any, field: str) -> list[str]:
    if isinstance(paths, str) or not isinstance(paths, Sequence):
        raise InvalidInputError(
            field, f"expected a list of JSON paths such as ['text'], got {paths!r}"
        )
    for path in paths:
        if not isinstance(path, str) or not path:
            raise InvalidInputError(field, f"paths must be non-empty strings, got {path!r}")
        if path != "$":
            try:
                tokenize_path(path)
            except Exception as exc:  # LangGraph's own parser decides what a path is
                raise InvalidInputError(field, f"invalid path {path!r}: {exc}") from exc
    return list(paths)


def _ttl_config(ttl: Any) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidInputError("ttl", f"expected a TTLConfig dict, got {ttl!r}")
    allowed = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}
    unknown = sorted(set(ttl) - allowed)
    if unknown:
        raise InvalidInputError(
            "ttl", f"unknown keys {unknown}; allowed: {', '.join(sorted(allowed))}"
        )
    default = ttl.get("default_ttl")
    if default is not None:
        _check_ttl(default, "ttl.default_ttl")
    return cast(TTLConfig, dict(ttl))


def _check_ttl(ttl: Any, field: str) -> None:
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not math.isfinite(ttl)
        or ttl <= 0
    ):
        raise InvalidInputError(
            field, f"expected None or a positive number of minutes, got {ttl!r}"
        )


def _check_count(value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(field, f"expected an integer >= 0, got {value!r}")


def _tuple_namespace(op: Any) -> Any:
    """The operation with a namespace given as a list turned into a tuple, as LangGraph's
    own stores take it."""
    if isinstance(op, SearchOp) and isinstance(op.namespace_prefix, list):
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    if isinstance(op, (GetOp, PutOp)) and isinstance(op.namespace, list):
        return op._replace(namespace=tuple(op.namespace))
    return op


def _check_op(op: Any, position: int) -> None:
    """Raise for a malformed operation, naming it by its position in the batch."""
    where = f"ops[{position}]"
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise InvalidInputError(
            where,
            f"unknown operation {type(op).__name__}; "
            "allowed: GetOp, PutOp, SearchOp, ListNamespacesOp",
        )
    namespace = op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())
    if not isinstance(namespace, tuple):
        raise InvalidInputError(
            f"{where}.namespace", f"expected a tuple of strings, got {namespace!r}"
        )
    validate_op_namespace(op)
    if isinstance(op, (GetOp, PutOp)) and not isinstance(op.key, str):
        raise InvalidInputError(f"{where}.key", f"expected a string, got {op.key!r}")
    if isinstance(op, GetOp) and not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if isinstance(op, PutOp):
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        # (A root label "langgraph" is refused by BaseStore.put, not here: LangGraph's
        # own stores accept such a PutOp in batch(), which LangGraph itself may send.)
        if op.value is not None:
            if not isinstance(op.value, Mapping):
                raise InvalidInputError(
                    f"{where}.value", f"expected a dict or None, got {op.value!r}"
                )
            bad = [k for k in op.value if not isinstance(k, str)]
            if bad:
                raise InvalidInputError(f"{where}.value", f"keys must be strings, got {bad[0]!r}")
        if op.index is not None and op.index is not False:
            _index_paths(op.index, f"{where}.index")
        if op.ttl is not None:
            _check_ttl(op.ttl, f"{where}.ttl")
    elif isinstance(op, SearchOp):
        _check_count(op.limit, f"{where}.limit")
        _check_count(op.offset, f"{where}.offset")
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidInputError(
                f"{where}.query", f"expected a string or None, got {op.query!r}"
            )
        translate_filter(op.filter, f"{where}.filter")
    elif isinstance(op, ListNamespacesOp):
        _check_count(op.limit, f"{where}.limit")
        _check_count(op.offset, f"{where}.offset")
        if op.max_depth is not None:
            _check_count(op.max_depth, f"{where}.max_depth")
        for condition in op.match_conditions or ():
            if not isinstance(condition, MatchCondition) or condition.match_type not in (
                "prefix",
                "suffix",
            ):
                raise InvalidInputError(
                    f"{where}.match_conditions",
                    "expected MatchCondition with match_type 'prefix' or 'suffix', "
                    f"got {condition!r}",
                )


# --- filters -------------------------------------------------------------------------------


def translate_filter(
    filter: Mapping[str, Any] | None, field: str = "filter"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A LangGraph search filter as ``(engine clauses, residual)``: conditions on a
    top-level field compared with a string, number or boolean become engine filters
    on ``lgv:<field>``; the others (a nested dict, a list, null) stay in the residual,
    checked in Python on every item in scope before any paging or search cut.

    Numbers never equal booleans, and ``$gt``/``$gte``/``$lt``/``$lte`` compare
    numbers only (an item whose field is missing or not a number does not pass),
    as in LangGraph's Postgres store (JSON semantics)."""
    if filter is None:
        return [], {}
    if not isinstance(filter, Mapping):
        raise InvalidInputError(field, f"expected a dict of value fields, got {filter!r}")
    clauses: list[dict[str, Any]] = []
    residual: dict[str, Any] = {}
    for name, expected in filter.items():
        path = f"{field}[{name!r}]"
        if not isinstance(name, str):
            raise InvalidInputError(field, f"field names must be strings, got {name!r}")
        key = VALUE_FIELD + name
        if isinstance(expected, Mapping) and any(str(k).startswith("$") for k in expected):
            for op, operand in expected.items():
                if op not in FILTER_OPERATORS:
                    raise InvalidInputError(
                        path, f"unknown operator {op!r}; allowed: {', '.join(FILTER_OPERATORS)}"
                    )
                if op in _ORDER_OPERATORS and (
                    isinstance(operand, bool)
                    or not isinstance(operand, (int, float))
                    or (isinstance(operand, float) and math.isnan(operand))
                ):
                    raise InvalidInputError(
                        f"{path}.{op}", f"compares numbers only (not NaN), got {operand!r}"
                    )
                scalar = _engine_scalar(operand, exact=True)
                if scalar is None:
                    residual.setdefault(name, {})[op] = operand
                else:
                    clauses.append({key: {op: scalar}})
        else:
            scalar = _engine_scalar(expected, exact=True)
            if scalar is None:
                residual[name] = expected
            else:
                clauses.append({key: scalar})
    return clauses, residual


def _engine_scalar(value: Any, *, exact: bool = False) -> str | int | float | bool | None:
    """``value`` as engine metadata when it is a string, boolean or finite number (an
    integer beyond 64 bits as a float, unless ``exact``), else None."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if value in _INT64:
            return value
        return None if exact else float(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _passes(memory: Memory, residual: Mapping[str, Any]) -> bool:
    value = json.loads(str(memory.metadata[VALUE]))
    return all(_json_matches(value.get(name), expected) for name, expected in residual.items())


def _json_matches(actual: Any, expected: Any) -> bool:
    """JSON containment as LangGraph filters mean it: a dict matches the fields it
    names, a list matches element by element, operators compare."""
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(
            _json_matches(actual.get(k), v) for k, v in expected.items()
        )
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(_json_matches(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return _json_equal(actual, expected)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (Mapping, list, tuple)) or isinstance(b, (Mapping, list, tuple)):
        return _json_matches(a, b) and _json_matches(b, a)
    return bool(a == b)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _json_equal(actual, operand)
    if op == "$ne":
        return not _json_equal(actual, operand)
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        return False
    if op == "$gt":
        return bool(actual > operand)
    if op == "$gte":
        return bool(actual >= operand)
    if op == "$lt":
        return bool(actual < operand)
    return bool(actual <= operand)


# --- engine filters over the item layout -------------------------------------------------------


def _all_of(*clauses: Mapping[str, Any] | None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for clause in clauses:
        if not clause:
            continue
        if set(clause) == {"$and"}:
            parts.extend(clause["$and"])
        else:
            parts.append(dict(clause))
    if not parts:
        return {DEPTH: {"$gte": 1}}
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _alive(now: float) -> dict[str, Any]:
    """Items without a TTL, or whose TTL has not run out."""
    return {"$or": [{HAS_TTL: False}, {EXPIRES: {"$gt": now}}]}


def _prefix_filter(prefix: tuple[str, ...]) -> dict[str, Any]:
    """Items whose namespace starts with ``prefix``: label by label, so ``("a",)``
    holds ``("a", "b")`` but never ``("ab",)``."""
    if not prefix:
        return {DEPTH: {"$gte": 1}}
    return _all_of(*({label_key(i): label} for i, label in enumerate(prefix)))


def _match_filter(condition: MatchCondition) -> dict[str, Any]:
    """A ``list_namespaces`` condition; ``"*"`` matches any one label."""
    path = tuple(condition.path)
    key = label_key if condition.match_type == "prefix" else label_from_end_key
    labels = path if condition.match_type == "prefix" else tuple(reversed(path))
    clauses: list[dict[str, Any]] = [{DEPTH: {"$gte": max(1, len(path))}}]
    clauses += [{key(i): label} for i, label in enumerate(labels) if label != "*"]
    return _all_of(*clauses)


# --- scores -------------------------------------------------------------------------------


def langgraph_scores(hits: Sequence[Any]) -> list[float]:
    """The scores of a query search's hits, best first: each hit's relevance
    (``Hit.score``, in [0, 1]), except that a hit without any positive evidence (relevance
    0) reports its cosine similarity when that is negative, as LangGraph's own stores
    report cosine; made non-increasing down the list, so the order stays the fused one."""
    out: list[float] = []
    lowest = math.inf
    for hit in hits:
        score = float(hit.score)
        cosine = hit.scores.get("vector")
        if score == 0.0 and cosine is not None and cosine < 0.0:
            score = float(cosine)
        lowest = min(lowest, score)
        out.append(lowest)
    return out


# --- items ---------------------------------------------------------------------------------


def _now() -> float:
    return datetime.now(timezone.utc).timestamp()


def _item(memory: Memory, *, search: bool = False, score: float | None = None) -> Item:
    meta = memory.metadata
    updated = datetime.fromtimestamp(float(meta[UPDATED]), tz=timezone.utc)
    created = memory.created_at or updated
    namespace = tuple(json.loads(str(meta[NAMESPACE])))
    value = json.loads(str(meta[VALUE]))
    key = str(meta[KEY])
    if search:
        return SearchItem(namespace, key, value, created, updated, score)
    return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)
