"""HybridMemory: the memory store and its hybrid search.

Quick tour (runs as written; the first call loads the embedding model)::

    from hybrid_memory import HybridMemory

    memory = HybridMemory(path="./memory")          # embedded Chroma on disk; no server
    memory.add("Alice prefers dark mode", tags=["alice", "ui"], metadata={"user": "alice"})
    hits = memory.search("what theme does alice like?", k=5, filter={"user": "alice"})
    hits[0].text, hits[0].score, hits[0].ranks      # ranks: {"vector": 1, "keyword": 1, "tag": 1}

``HybridMemory()`` keeps everything in memory; ``HybridMemory(url="http://host:8000")``
or ``HybridMemory(client=chromadb.HttpClient(...))`` shares one memory through a
Chroma server.

State (docs/architecture.md): the Chroma collection holds everything (text, tags, metadata,
times, vectors). The SQLite keyword index is derived from it, checked against it
on open (count and write watermark) and repaired when it drifted, then kept in
step by every write of this process and by a periodic check for writes of other
processes (in the background: see :meth:`HybridMemory.sync`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from os import PathLike
from typing import Any

from hybrid_memory._embedding.embedders import Embedder
from hybrid_memory._memory.existing import existing_store, missing_namespace
from hybrid_memory._memory.parts import NamespaceHandle, StoreHandle, StoreParts
from hybrid_memory._memory.read_service import serve_reads, stop_serving
from hybrid_memory._memory.repairing import repairing
from hybrid_memory._model.errors import InvalidInputError, MemoryNotFoundError
from hybrid_memory._model.filters import Node, parse_filter
from hybrid_memory._model.inputs import (
    PendingMemories,
    new_memory,
    valid_alpha,
    valid_change,
    valid_changes,
    valid_id,
    valid_ids,
    valid_k,
    valid_max_tokens,
    valid_mmr,
    valid_page,
    valid_tags,
    valid_text,
)
from hybrid_memory._model.namespaces import valid_namespace
from hybrid_memory._model.near_duplicates import NearDuplicateRule
from hybrid_memory._model.records import to_memory
from hybrid_memory._model.results import Memory, SearchResult, StoreStats
from hybrid_memory._model.settings import SEARCH_SETTINGS, HybridMemorySettings, load_settings
from hybrid_memory._model.times import now_timestamp, to_timestamp
from hybrid_memory._model.write_outcomes import (
    ON_SIMILAR,
    AddResult,
    DeleteReport,
    OnSimilar,
    SimilarMemory,
    WriteReport,
)
from hybrid_memory._search.searcher import Query
from hybrid_memory._search.supersession import check_links
from hybrid_memory._search.time_scope import plan_time
from hybrid_memory._write.similar import SimilarCheck, similar_to


class HybridMemory:
    """A memory store with hybrid (vector + BM25 keyword + tag) search.

    Args:
        path: directory for an embedded, persistent store. Exclusive with ``url``
            and ``client``. Neither: an in-memory store.
        url: a Chroma server (``http://127.0.0.1:8000``) shared by many agents.
        client: a ready Chroma client (``chromadb.HttpClient(...)``, ``PersistentClient``…).
        collection: the Chroma collection name (default ``hybrid_memory``; an
            in-memory store without one gets a private collection).
        embedding: a LangChain ``Embeddings``, a LlamaIndex embedding model, a
            Chroma embedding function or a ``callable(list[str]) -> vectors``;
            default all-MiniLM-L6-v2, offline.
        embedding_name: the name recorded with the collection for that embedding
            (default: derived from the object). Reopening a collection with another
            name fails with :class:`EmbeddingMismatchError`.
        settings: a :class:`HybridMemorySettings`; environment variables
            ``HYBRID_MEMORY_*`` fill what it does not set.
        create: with ``False``, open only a store that exists (a directory holding one,
            a collection the path or server holds): else :class:`StoreNotFoundError`
            naming what is missing, and nothing is created. What a read opens.
        **overrides: any settings field, beating both.
    """

    def __init__(
        self,
        path: str | PathLike[str] | None = None,
        *,
        url: str | None = None,
        client: Any = None,
        collection: str | None = None,
        embedding: Any = None,
        embedding_name: str | None = None,
        settings: HybridMemorySettings | None = None,
        create: bool = True,
        **overrides: Any,
    ) -> None:
        if client is not None and (path is not None or url is not None):
            raise InvalidInputError("client", "pass either client, or path/url, not both")
        if path is not None:
            overrides["path"] = str(path)
        if url is not None:
            overrides["url"] = url
        if collection is not None:
            overrides["collection"] = collection
        self.settings = load_settings(settings, **overrides)
        if not isinstance(create, bool):
            raise InvalidInputError("create", f"expected True or False, got {create!r}")
        with existing_store(self.settings, client) if not create else contextlib.nullcontext():
            self._handle: StoreHandle | NamespaceHandle = StoreHandle(
                StoreParts(self.settings, client, embedding, embedding_name)
            )
        self._owner = True
        self._closed = False
        # On open, compare ids too: an add and a delete made behind the index's back
        # (a crash, another tool) can leave the counts equal. An index kept in a cache
        # for a server store does that in the background: the ids of a large store
        # are many requests to the server, and the open catches up on its watermark.
        try:
            self._parts.sync.open(
                reconcile=self._parts.server is None,
                warm_above=self.settings.warm_in_background,
            )
        except BaseException:
            self._parts.close()
            raise
        # While this process owns the path: the reads of command line clients.
        self._read_service = serve_reads(self)

    @property
    def _parts(self) -> StoreParts:
        """This store's parts; a namespace view's, opened again if they were closed for
        being the least recently used (see hybrid_memory._memory.parts)."""
        return self._handle.parts()

    @property
    def embedder(self) -> Embedder:
        """The embedding every memory and query of this store goes through."""
        return self._parts.embedder

    @repairing
    def sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        """Bring the keyword index up to date with the collection.

        Cheap by default: picks up the memories stamped since the index's last complete
        read of the collection (writes that committed late included) and reconciles ids
        when the counts differ. ``reconcile=True`` compares ids even
        when the counts agree; ``full=True`` also re-reads every memory (after another
        process updated memories in place with an older clock, for example).

        The store calls this by itself: on open, and then every ``sync_interval``
        seconds while it is used (searches, adds, filtered counts and ``tags()``
        notice the interval has passed). That periodic check runs in the background,
        so no call waits for it: writes of other processes (sharing a path or a
        Chroma server) become visible within about ``sync_interval`` of a check
        falling due. After the store sat unused for more than two intervals, the
        first call checks before it answers; with ``sync_interval=0`` every call
        does. Call ``sync()`` to see another process's write at once.
        """
        self._parts.sync.sync(full=full, reconcile=reconcile)

    def _maybe_sync(self) -> None:
        self._parts.sync.maybe_sync(self.settings.sync_interval)

    # --- writing ------------------------------------------------------------------------

    @repairing
    def add(
        self,
        text: str,
        *,
        id: str | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | str | float | None = None,
        upsert: bool = False,
        allow_duplicates: bool = False,
        supersedes: str | None = None,
        on_similar: OnSimilar | None = None,
    ) -> AddResult:
        """Store one memory and return its id, an :class:`AddResult` (a ``str``) whose
        ``outcome`` says what was done: ``"added"``, ``"duplicate"`` or ``"replaced"``.

        Without an ``id``, a memory whose exact text is already stored with the same
        metadata is not stored again: its existing id is returned as a ``"duplicate"``
        (``allow_duplicates=True`` stores a copy).
        With an ``id`` that exists, :class:`DuplicateIdError` unless ``upsert=True``
        (then ``"replaced"``).

        ``supersedes``: the id of a stored memory this one replaces ("moved to Berlin"
        after "lives in Paris"): kept as the metadata key ``supersedes``; searches still
        return the older memory, ranked lower (``supersede_factor``) and marked
        (``Hit.superseded_by``). An id not stored in this store (or namespace) raises
        :class:`InvalidInputError` naming ``supersedes``, and nothing is stored.

        A new memory that memories of this store (or namespace) say nearly the same as
        (a restatement: settings ``similar_cosine``, ``similar_words_cosine``) is
        ``"similar"``: ``AddResult.similar`` names them, most similar first, with their
        cosine similarity. ``on_similar`` says what is done then (default the setting
        ``on_similar``, ``"keep"``): ``"keep"`` stores it beside them, ``"skip"`` stores
        nothing and returns the most similar one's id, ``"supersede"`` stores it as
        superseding the most similar one (as ``supersedes=``).
        """
        item = dict(text=text, id=id, tags=tags, metadata=metadata, created_at=created_at)
        if supersedes is not None:
            item["supersedes"] = supersedes
        memories = PendingMemories.of([new_memory(item, "", self.settings)])
        written = self._add(
            memories,
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            on_similar=on_similar,
            one=True,
        )
        return written.results[0]

    @repairing
    def add_many(
        self,
        items: Iterable[str | Mapping[str, Any]],
        *,
        upsert: bool = False,
        allow_duplicates: bool = False,
        on_similar: OnSimilar | None = None,
    ) -> WriteReport:
        """Store many memories (embedded in batches); returns their ids in order, as a
        :class:`WriteReport` (the list of ids) whose ``results`` say what was done with
        each item and which gathers the ids ``added``, the ``duplicates`` of stored
        memories, those ``replaced`` and those ``similar`` to stored memories or to
        earlier items (``on_similar`` as in :meth:`add`).

        Each item is a text or a mapping with ``text`` and optionally ``id``,
        ``tags``, ``metadata``, ``created_at``, ``supersedes`` (a stored memory's id, or
        an earlier item's, as in :meth:`add`). Everything is validated before
        anything is written. Memories are then embedded and written one batch at a time
        (Chroma's largest), so a large call holds one batch in memory; a failure part-way
        (the model, the store) leaves the earlier batches stored, and the same call
        again stores the rest once (memories without ids are found by content, ids are
        upserted with ``upsert=True``).
        """
        if isinstance(items, (str, Mapping)):
            raise InvalidInputError("items", "expected a list of texts or dicts, not a single one")
        given = items if isinstance(items, Sequence) else list(items)
        memories = PendingMemories.of_items(given, self.settings)
        return self._add(
            memories, upsert=upsert, allow_duplicates=allow_duplicates, on_similar=on_similar
        )

    def _add(
        self,
        memories: PendingMemories,
        *,
        upsert: bool,
        allow_duplicates: bool,
        on_similar: OnSimilar | None,
        one: bool = False,
    ) -> WriteReport:
        policy = self.settings.on_similar if on_similar is None else on_similar
        if policy not in ON_SIMILAR:
            raise InvalidInputError(
                "on_similar", f"expected one of {', '.join(ON_SIMILAR)}, got {on_similar!r}"
            )
        if memories.links:
            self._check_links(
                [
                    ("supersedes" if one else f"items[{p}].supersedes", memories.ids[p], target)
                    for p, target in memories.links.items()
                ],
                [i for i in memories.ids if i is not None],
            )
        return self._parts.writer.add(
            memories,
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            sync_interval=self.settings.sync_interval,
            similar=SimilarCheck(NearDuplicateRule.of(self.settings), policy),
        )

    @repairing
    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        supersedes: str | None = None,
    ) -> Memory:
        """Change a memory's text, tags and/or metadata (each replaces the old value).
        ``supersedes`` links it to a stored memory it replaces (as in :meth:`add`; set
        into the new metadata, or the stored metadata when none is given).

        The memory is re-embedded only when its text changes. Returns the new memory
        (the update's outcome: it was updated); an id that does not exist raises
        :class:`MemoryNotFoundError` and changes nothing.
        """
        item = {"id": id, "text": text, "tags": tags, "metadata": metadata}
        change = valid_change(item | {"supersedes": supersedes}, "", self.settings)
        if change.supersedes is not None:
            self._check_links([("supersedes", change.id, change.supersedes)])
        return to_memory(self._parts.writer.update([change])[0])

    @repairing
    def update_many(self, updates: Iterable[Mapping[str, Any]]) -> list[Memory]:
        """Change many memories in one write: each update is a dict with ``id`` and any of
        ``text``, ``tags``, ``metadata`` (as :meth:`update`; each id once). Everything is
        checked first (a bad one is named ``updates[3].tags``; an id that does not exist
        raises :class:`MemoryNotFoundError`): then nothing changes. Returns the new
        memories in order; only changed texts are re-embedded, in one call."""
        changes = valid_changes(updates, self.settings)
        if not changes:
            return []
        self._check_links(
            (f"updates[{n}].supersedes", c.id, c.supersedes)
            for n, c in enumerate(changes)
            if c.supersedes is not None
        )
        return [to_memory(row) for row in self._parts.writer.update(changes)]

    def _check_links(
        self, links: Iterable[tuple[str, str | None, str]], written_with: Iterable[str] = ()
    ) -> None:
        check_links(links, self._parts.collection, written_with)

    @repairing
    def delete(
        self, ids: str | Sequence[str] | None = None, *, filter: Mapping[str, Any] | None = None
    ) -> DeleteReport:
        """Delete memories by id (all must exist, else :class:`MemoryNotFoundError` and
        nothing is deleted) or by a metadata filter; returns how many, as a
        :class:`DeleteReport` (an ``int``) whose ``ids`` are the deleted memories' ids."""
        if (ids is None) == (filter is None):
            raise InvalidInputError("delete", "give exactly one of ids or filter")
        if ids is not None:
            return self._parts.writer.delete(valid_ids(ids))
        node = self._parse_filter(filter)
        if node is None:
            raise InvalidInputError(
                "filter", "an empty filter would delete everything; pass ids instead"
            )
        return self._parts.writer.delete_matching(node)

    def _parse_filter(self, filter: Mapping[str, Any] | None) -> Node | None:
        return parse_filter(filter, single_valued=self._parts.index.single_valued)

    # --- reading ---------------------------------------------------------------------------

    def get(self, id: str) -> Memory:
        """The memory with this id, or :class:`MemoryNotFoundError`."""
        return self.get_many([id])[0]

    @repairing
    def get_many(self, ids: Sequence[str]) -> list[Memory]:
        """The memories with these ids, in the same order; every id must exist."""
        id_list = valid_ids(ids)
        if not id_list:
            return []
        unique = list(dict.fromkeys(id_list))  # Chroma refuses a repeated id
        found = {
            row.id: to_memory(row)
            for page in self._parts.collection.rows_by_id(unique)
            for row in page
        }
        missing = [i for i in unique if i not in found]
        if missing:
            raise MemoryNotFoundError.of(missing)
        return [found[i] for i in id_list]

    def existing(self, ids: str | Sequence[str]) -> set[str]:
        """Which of ``ids`` name a stored memory (of this store or namespace): the
        others are simply left out, nothing is raised for them. Answered by the
        collection, so another process's write counts at once."""
        return self._parts.collection.existing(valid_ids(ids))

    @repairing
    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many memories there are (matching ``filter``, when given)."""
        if filter is None:
            return self._parts.collection.count()
        self._parts.sync.wait_warm()
        node = self._parse_filter(filter)
        if node is None:
            return self._parts.collection.count()
        self._maybe_sync()
        return self._parts.index.count(node)

    def __len__(self) -> int:
        return self.count()

    @repairing
    def list_memories(
        self,
        filter: Mapping[str, Any] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Memory]:
        """The memories passing ``filter`` (all without one), oldest first: by
        ``created_at``, then by id (``newest_first=True``: the reverse order). ``offset``
        skips that many, ``limit`` (None: no limit) caps the answer: together they page
        through a listing with no query.

        The filter is applied before the paging, in the keyword index, like
        :meth:`count` with a filter (the index is checked against the collection
        every ``sync_interval``; call :meth:`sync` to see another process's write
        at once)."""
        valid_page(limit, offset)
        if not isinstance(newest_first, bool):
            raise InvalidInputError("newest_first", f"expected True or False, got {newest_first!r}")
        node = self._parse_filter(filter)  # the same checks as count, search and delete
        if limit == 0:
            return []
        self._parts.sync.wait_warm()
        self._maybe_sync()
        ids = self._parts.index.page(node, limit, offset, newest_first=newest_first)
        return self._parts.searcher.memories(ids, len(ids))

    @repairing
    def tags(self) -> list[str]:
        """Every tag in use, sorted."""
        self._parts.sync.wait_warm()
        self._maybe_sync()
        return sorted(self._parts.index.all_tags())

    @repairing
    def stats(self) -> StoreStats:
        """How many memories there are, how many the keyword index holds, how many tags,
        where the store lives and what embeds it (of this namespace, for a namespace
        view). See :class:`StoreStats`; it holds local paths and URLs, so format it
        before showing it to anyone else."""
        self._maybe_sync()
        s, parts = self.settings, self._parts
        if s.url:
            kind, location = "server", s.url
        elif s.path:
            kind, location = "embedded", s.path
        else:
            kind, location = ("client" if parts.given_client else "in-memory"), None
        return StoreStats(
            count=parts.collection.count(),
            indexed=parts.index.count(),
            tags=len(parts.index.all_tags()),
            kind=kind,
            location=location,
            collection=parts.collection.name,
            index_path=parts.index.path,
            embedding=parts.embedder.name,
            dimension=parts.collection.dimension,
            namespace=parts.namespace_path,
            sync_interval=s.sync_interval,
        )

    @property
    def namespace_path(self) -> tuple[str, ...]:
        """The names of the namespaces this view is scoped to, outermost first: ``()``
        for the store itself, ``("alice",)`` for ``memory.namespace("alice")``."""
        return self._parts.namespace_path

    def namespace(self, name: str, *, create: bool = True) -> HybridMemory:
        """A view of this store holding only the memories of namespace ``name`` (any
        non-empty string): its share of the one collection all namespaces of the store
        live in (on the same Chroma client, embedded the same way, with the same
        settings), and its own keyword index and tag set.

        Nothing crosses between namespaces, or between a namespace and the store: ids
        (``"k"`` in namespace ``"A:sub"`` and ``"sub:k"`` in namespace ``"A"`` are two
        memories), tags, counts, :meth:`stats` and keyword scores (BM25 statistics are
        per namespace). Namespaces nest: ``memory.namespace("team").namespace("alice")``.

        The view is opened on first use (its index checked against its collection) and
        kept: asking again for the same name is cheap and shares it. Like views made by
        :meth:`with_settings`, its :meth:`close` does nothing: closing the store closes
        every namespace opened from it. Each name maps to a name of its own,
        ``<collection>.ns.<readable part>.<hash of the exact name>`` (its
        ``settings.collection``; earlier versions made it a Chroma collection, moved into
        the shared one, ``<collection>.namespaces``, when the namespace is opened), and,
        for an embedded store, to one keyword index file beside the store's.

        With ``create=False``, only a namespace that exists (one :meth:`namespaces`
        lists): else :class:`StoreNotFoundError` naming it, and nothing is created.
        """
        name = valid_namespace(name)
        if not create:
            names = self.namespaces()
            if name not in names:
                raise missing_namespace(name, names, self.namespace_path)
        handle = NamespaceHandle(self._handle, name)
        parts = handle.parts()
        view = object.__new__(HybridMemory)
        # A copy, not a new validation (which re-reads the environment, ~4 ms): both
        # values were validated when the namespace's parts were built from them.
        view.settings = self.settings.model_copy(
            update={
                "collection": parts.settings.collection,
                "index_path": parts.settings.index_path,
            }
        )
        view._handle = handle
        view._owner = False
        view._closed = False
        return view

    def namespaces(self) -> list[str]:
        """The names of the namespaces directly under this store (or view), sorted:
        those :meth:`namespace` opened here or in any other process."""
        return self._parts.namespace_names()

    def with_settings(self, **overrides: Any) -> HybridMemory:
        """A view of this store with other search settings (k, alpha, tag_weight,
        recency_decay, candidates, rrf_k, …): same memories, index and embedder."""
        wrong = sorted(set(overrides) - SEARCH_SETTINGS)
        if wrong:
            raise InvalidInputError(
                "with_settings",
                f"{', '.join(wrong)} cannot change on an open store; search settings that can: "
                f"{', '.join(sorted(SEARCH_SETTINGS))}",
            )
        view = object.__new__(HybridMemory)
        view.settings = load_settings(self.settings, **overrides)
        view._handle = self._handle
        view._owner = False
        view._closed = False
        return view

    # --- search -------------------------------------------------------------------------------

    @repairing
    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        alpha: float | None = None,
        now: datetime | str | float | None = None,
        max_tokens: int | None = None,
        after: datetime | str | float | None = None,
        before: datetime | str | float | None = None,
        mmr: float | None = None,
    ) -> SearchResult:
        """The ``k`` memories that best answer ``query``, best first.

        Args:
            query: free text.
            k: how many hits (1..max_k; default ``settings.k``).
            filter: Chroma-style metadata filter applied by every leg before its cut.
            tags: tags to match in the tag leg besides those found in the query text.
            alpha: vector share against the keyword leg, in [0, 1]; default adaptive.
            now: the current time for recency decay and for the times the query names
                ("last week", "in March"; default: now, UTC).
            max_tokens: stop adding hits once their texts would exceed this many tokens.
            after, before: only memories created at or after ``after`` and before
                ``before`` (a datetime, ISO 8601 string or epoch seconds; either alone is
                an open window), on every leg before its cut. Without them, with the
                setting ``time_phrases`` on (``"boost"`` or ``"narrow"``; default
                ``"off"``), a time the query names is read against ``now`` and favours
                or limits the memories created then; ``SearchResult.time_window`` shows
                how the search read it.
            mmr: maximal marginal relevance, the weight of variety in [0, 1] (default the
                setting ``mmr``, 0: relevance alone): the hits are then picked one by one
                among more candidates, each trading its fused score against its cosine
                with the hits picked before it. LangChain's ``lambda_mult`` and
                LlamaIndex's ``mmr_threshold`` are ``1 - mmr``.

        Memories that say nearly the same thing come back as one hit (the best ranked,
        a superseding one before those it supersedes), the others named in ``Hit.similar_ids``; the
        setting ``collapse_similar=False`` shows each.
        """
        s = self.settings
        text = valid_text(query, s.max_text_length, "query")
        extra_tags = valid_tags(tags, s)
        # While the index warms, the known tags are not all known yet (see _search).
        found = () if self._parts.sync.warming() else self._parts.tags.find(text)
        matched = tuple(dict.fromkeys((*found, *extra_tags)))
        return self._search(
            text=text,
            tags=matched,
            k=k,
            filter=filter,
            alpha=alpha,
            now=now,
            max_tokens=max_tokens,
            after=after,
            before=before,
            read_phrase=True,
            mmr=mmr,
        )

    @repairing
    def related(
        self,
        id: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        after: datetime | str | float | None = None,
        before: datetime | str | float | None = None,
    ) -> SearchResult:
        """Memories near the one with ``id``: vector neighbours, shared tags and shared
        keywords, fused like a search (the memory itself excluded); ``after``/``before``
        limit them to a window of creation times, as in :meth:`search`."""
        memory_id = valid_id(id)
        row, _, vector = self._parts.collection.stored(memory_id)
        return self._search(
            text=row.text,
            tags=row.tags,
            k=k,
            filter=filter,
            vector=list(vector),
            exclude=memory_id,
            after=after,
            before=before,
        )

    @repairing
    def similar(self, id: str, *, k: int = 20) -> tuple[SimilarMemory, ...]:
        """The memories of this store (or namespace) that say nearly what the memory with
        ``id`` says, most similar first, each a :class:`SimilarMemory` (id and cosine
        similarity): those an add of it would report (settings ``similar_cosine``,
        ``similar_words_cosine``), among its ``k`` nearest. For a clean-up: keep one,
        delete or supersede the others. :class:`MemoryNotFoundError` when there is none."""
        memory_id = valid_id(id)
        nearest = valid_k(k, self.settings.max_k)
        row, _, vector = self._parts.collection.stored(memory_id)
        rule = NearDuplicateRule.of(self.settings)
        return similar_to(self._parts.collection, memory_id, row.text, vector, rule, nearest)

    def _search(
        self,
        *,
        text: str,
        tags: tuple[str, ...],
        k: int | None,
        filter: Mapping[str, Any] | None,
        alpha: float | None = None,
        now: datetime | str | float | None = None,
        max_tokens: int | None = None,
        vector: list[float] | None = None,
        exclude: str | None = None,
        after: datetime | str | float | None = None,
        before: datetime | str | float | None = None,
        read_phrase: bool = False,
        mmr: float | None = None,
    ) -> SearchResult:
        s = self.settings
        diversity = valid_mmr(s.mmr if mmr is None else mmr)
        k_checked = valid_k(s.k if k is None else k, s.max_k)
        alpha_checked = valid_alpha(alpha)
        tokens_checked = valid_max_tokens(max_tokens)
        moment = now_timestamp() if now is None else to_timestamp(now, field="now")
        node = self._parse_filter(filter)
        self._maybe_sync()
        searcher = self._parts.searcher
        plan = plan_time(
            text if read_phrase else None,
            moment,
            node,
            after=after,
            before=before,
            mode=s.time_phrases,
            anchor_time=lambda event: searcher.anchor_time(event, node, s),
            order_weight=s.time_order_weight,
            to_now=s.time_window_to_now,
        )
        # A keyword index still warming (a new process on a large store) cannot rank:
        # an unfiltered search answers from the vector leg; a filter (the caller's or a
        # time window's) is tested in the index (and which fields hold lists is read
        # there), so a filtered one waits.
        warming = self._parts.sync.warming()
        if warming is not None and plan.node is not None:
            self._parts.sync.wait_warm()
            warming = None
        query = Query(
            text=text,
            tags=tags,
            k=k_checked,
            alpha=alpha_checked,
            max_tokens=tokens_checked,
            now=moment,
            node=plan.node,
            vector=vector,
            exclude=exclude,
            boost_window=plan.boost,
            order=plan.order,
            time_window=plan.shown,
            mmr=diversity,
        )
        return searcher.search(query, s, warming=warming)

    # --- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the keyword index and worker threads (a private in-memory collection is
        dropped), and those of every namespace opened from this store. Views made by
        :meth:`with_settings` and :meth:`namespace` close nothing: the store owns them."""
        if not self._owner or self._closed:
            return
        self._closed = True
        stop_serving(self, self._read_service)
        self._parts.close()

    def __enter__(self) -> HybridMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        s = self.settings
        where = s.url or s.path or "in-memory"
        scoped = f", namespace={self.namespace_path!r}" if self.namespace_path else ""
        return f"HybridMemory({where!r}, collection={self._parts.collection.name!r}{scoped})"
