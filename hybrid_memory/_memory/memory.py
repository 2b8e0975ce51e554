"""HybridMemory: the memory store and its hybrid search.

Quick tour (runs as written; the first call loads the embedding model)::

    from hybrid_memory import HybridMemory

    memory = HybridMemory(path="./memory")          # embedded Chroma on disk; no server
    memory.add("Alice prefers dark mode", tags=["alice", "ui"], metadata={"user": "alice"})
    hits = memory.search("what theme does alice like?", k=5, filter={"user": "alice"})
    hits[0].text, hits[0].score, hits[0].ranks      # ranks: {"vector": 1, "keyword": 1, "tag": 1}

``HybridMemory()`` keeps everything in memory; ``HybridMemory(url="http://host:8000")`` or
``HybridMemory(client=chromadb.HttpClient(...))`` shares one memory through a Chroma server.

State (docs/architecture.md): the Chroma collection holds everything (text, tags, metadata,
times, vectors). The SQLite keyword index is derived from it, checked against it
on open (count and write watermark) and repaired when it drifted, then kept in
step by every write of this process and by a periodic check for writes of other
processes (in the background: see :meth:`HybridMemory.sync`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from os import PathLike
from typing import Any

from hybrid_memory._embedding.embedders import Embedder
from hybrid_memory._memory.parts import NamespaceHandle, StoreHandle, StoreParts
from hybrid_memory._memory.read_service import serve_reads, stop_serving
from hybrid_memory._memory.reading import Reading
from hybrid_memory._memory.searching import Searching
from hybrid_memory._memory.views import (
    described,
    namespace_view,
    open_store,
    search_settings_view,
)
from hybrid_memory._memory.writing import Writing
from hybrid_memory._model.results import Memory, SearchResult, StoreStats
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._model.write_outcomes import (
    AddResult,
    DeleteReport,
    OnSimilar,
    SimilarMemory,
    WriteReport,
)


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
        embedding_name: the name recorded with the collection for that embedding (default:
            derived from the object); another name fails with :class:`EmbeddingMismatchError`.
        settings: a :class:`HybridMemorySettings`; environment variables
            ``HYBRID_MEMORY_*`` fill what it does not set.
        create: with ``False``, open only a store that exists (what a read opens): else
            :class:`StoreNotFoundError` naming what is missing, and nothing is created.
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
        self.settings, self._handle = open_store(
            path, url, client, collection, embedding, embedding_name, settings, create, overrides
        )
        self._writing, self._reading, self._searching = _halves(self.settings, self._handle)
        self._owner = True  # a view closes nothing: its store owns the parts
        self._read_service = serve_reads(self)  # command line reads, while the path is ours

    @property
    def _parts(self) -> StoreParts:
        return self._handle.parts()

    @property
    def embedder(self) -> Embedder:
        """The embedding every memory and query of this store goes through."""
        return self._parts.embedder

    def sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        """Bring the keyword index up to date with the collection (``reconcile=True``: its
        ids compared even when the counts agree; ``full=True``: every memory read again).
        The store does this by itself, on open and then in the background every
        ``sync_interval`` seconds while it is used; call it to see another process's
        write at once."""
        self._reading.sync(full=full, reconcile=reconcile)

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
        metadata is not stored again: its id is returned as a ``"duplicate"``
        (``allow_duplicates=True`` stores a copy). With an ``id`` that exists,
        :class:`DuplicateIdError` unless ``upsert=True`` (then ``"replaced"``).

        ``supersedes``: the id of a stored memory this one replaces ("moved to Berlin"
        after "lives in Paris"), kept as the metadata key ``supersedes``: searches still
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
        return self._writing.add(
            text,
            id=id,
            tags=tags,
            metadata=metadata,
            created_at=created_at,
            upsert=upsert,
            allow_duplicates=allow_duplicates,
            supersedes=supersedes,
            on_similar=on_similar,
        )

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

        Each item is a text or a mapping with ``text`` and optionally ``id``, ``tags``,
        ``metadata``, ``created_at``, ``supersedes`` (as in :meth:`add`; an earlier item's
        id too). Everything is validated before anything is written; then each batch is
        embedded and written in turn, so a failure part-way leaves the earlier batches
        stored, and the same call again stores the rest once (items without ids are found
        by content; items with ids need ``upsert=True``).
        """
        return self._writing.add_many(
            items, upsert=upsert, allow_duplicates=allow_duplicates, on_similar=on_similar
        )

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        supersedes: str | None = None,
    ) -> Memory:
        """Change a memory's text, tags and/or metadata (each replaces the old value);
        ``supersedes`` links it to a stored memory it replaces (as in :meth:`add`). Only a
        changed text is embedded again. Returns the new memory; an id that does not exist
        raises :class:`MemoryNotFoundError` and changes nothing."""
        return self._writing.update(
            id, text=text, tags=tags, metadata=metadata, supersedes=supersedes
        )

    def update_many(self, updates: Iterable[Mapping[str, Any]]) -> list[Memory]:
        """Change many memories in one write: each update a dict with ``id`` and any of
        ``text``, ``tags``, ``metadata`` (as :meth:`update`; each id once), all checked
        first (a bad one named ``updates[3].tags``, a missing id :class:`MemoryNotFoundError`:
        then nothing changes). Only changed texts are re-embedded; the new memories return."""
        return self._writing.update_many(updates)

    def delete(
        self, ids: str | Sequence[str] | None = None, *, filter: Mapping[str, Any] | None = None
    ) -> DeleteReport:
        """Delete memories by id (all must exist, else :class:`MemoryNotFoundError` and
        nothing is deleted) or by a metadata filter; returns how many, as a
        :class:`DeleteReport` (an ``int``) whose ``ids`` are the deleted memories' ids."""
        return self._writing.delete(ids, filter=filter)

    def get(self, id: str) -> Memory:
        """The memory with this id, or :class:`MemoryNotFoundError`."""
        return self.get_many([id])[0]

    def get_many(self, ids: Sequence[str]) -> list[Memory]:
        """The memories with these ids, in the same order; every id must exist."""
        return self._reading.get_many(ids)

    def existing(self, ids: str | Sequence[str]) -> set[str]:
        """Which of ``ids`` name a stored memory (of this store or namespace), the others
        left out; answered by the collection, so another process's write counts at once."""
        return self._reading.existing(ids)

    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many memories there are (matching ``filter``, when given)."""
        return self._reading.count(filter)

    def __len__(self) -> int:
        return self.count()

    def list_memories(
        self,
        filter: Mapping[str, Any] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Memory]:
        """The memories passing ``filter`` (all without one), oldest first by ``created_at``
        then id (``newest_first=True``: the reverse); ``offset`` skips that many, ``limit``
        (None: no limit) caps the answer, to page through a listing with no query. The
        filter is applied in the keyword index before the paging, as :meth:`count` does."""
        return self._reading.list_memories(
            filter, limit=limit, offset=offset, newest_first=newest_first
        )

    def tags(self) -> list[str]:
        """Every tag in use, sorted."""
        return self._reading.tags()

    def stats(self) -> StoreStats:
        """How many memories there are, how many the keyword index holds, how many tags,
        where the store lives and what embeds it (of this namespace, for a view): a
        :class:`StoreStats`, holding local paths and URLs (format it before sharing it)."""
        return self._reading.stats()

    @property
    def namespace_path(self) -> tuple[str, ...]:
        """The names of the namespaces this view is scoped to, outermost first: ``()``
        for the store itself, ``("alice",)`` for ``memory.namespace("alice")``."""
        return self._parts.namespace_path

    def namespace(self, name: str, *, create: bool = True) -> HybridMemory:
        """A view of this store holding only the memories of namespace ``name`` (any
        non-empty string), with its own keyword index and tag set (same client, embedding
        and settings). Nothing crosses between namespaces, or between a namespace and the
        store: ids, tags, counts, :meth:`stats` and keyword scores (BM25 statistics are per
        namespace). Namespaces nest: ``memory.namespace("team").namespace("alice")``.

        The view is opened on first use and kept: asking again for the same name is
        cheap and shares it. Like views made by :meth:`with_settings`, its :meth:`close`
        does nothing: closing the store closes every namespace opened from it (how they
        are stored: docs/concepts/namespaces.md). With ``create=False``, only one that
        :meth:`namespaces` lists: else :class:`StoreNotFoundError`, and nothing is created.
        """
        return _view(self, *namespace_view(self.settings, self._handle, name, create))

    def namespaces(self) -> list[str]:
        """The names of the namespaces directly under this store (or view), sorted:
        those :meth:`namespace` opened here or in any other process."""
        return self._parts.namespace_names()

    def with_settings(self, **overrides: Any) -> HybridMemory:
        """A view of this store with other search settings (k, alpha, tag_weight,
        recency_decay, candidates, rrf_k, …): same memories, index and embedder."""
        return _view(self, search_settings_view(self.settings, overrides), self._handle)

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
            after, before: only memories created in ``[after, before)`` (datetimes, ISO
                8601 strings or epoch seconds; either alone is an open window), on every
                leg before its cut. Without them, the setting ``time_phrases`` may read a
                time the query names (``SearchResult.time_window`` shows how).
            mmr: maximal marginal relevance, the weight of variety in [0, 1] (default the
                setting ``mmr``, 0: relevance alone): the hits are then picked one by one
                among more candidates, each trading its fused score against its cosine
                with the hits picked before it. LangChain's ``lambda_mult`` and
                LlamaIndex's ``mmr_threshold`` are ``1 - mmr``.

        Memories that say nearly the same thing come back as one hit (the best ranked,
        a superseding one before those it supersedes), the others named in
        ``Hit.similar_ids``; the setting ``collapse_similar=False`` shows each.
        """
        return self._searching.search(
            query,
            k=k,
            filter=filter,
            tags=tags,
            alpha=alpha,
            now=now,
            max_tokens=max_tokens,
            after=after,
            before=before,
            mmr=mmr,
        )

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
        return self._searching.related(id, k=k, filter=filter, after=after, before=before)

    def similar(self, id: str, *, k: int = 20) -> tuple[SimilarMemory, ...]:
        """The memories of this store (or namespace) that say nearly what the memory with
        ``id`` says, most similar first, each a :class:`SimilarMemory` (id and cosine
        similarity): those an add of it would report (settings ``similar_cosine``,
        ``similar_words_cosine``), among its ``k`` nearest. For a clean-up: keep one,
        delete or supersede the others. :class:`MemoryNotFoundError` when there is none."""
        return self._reading.similar(id, k=k)

    def close(self) -> None:
        """Release the keyword index and worker threads (a private in-memory collection is
        dropped), and those of every namespace opened from this store. Views made by
        :meth:`with_settings` and :meth:`namespace` close nothing: the store owns them."""
        if self._owner:  # closing twice does nothing
            stop_serving(self, self._read_service)
            self._parts.close()

    def __enter__(self) -> HybridMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return described(self.settings, self._parts)


def _halves(
    settings: HybridMemorySettings, handle: StoreHandle | NamespaceHandle
) -> tuple[Writing, Reading, Searching]:
    """What a store or view hands its calls to."""
    return Writing(settings, handle), Reading(settings, handle), Searching(settings, handle)


def _view(
    store: HybridMemory, settings: HybridMemorySettings, handle: StoreHandle | NamespaceHandle
) -> HybridMemory:
    """A view of a store (a namespace, other search settings): it closes with the store."""
    view = copy.copy(store)
    view.settings, view._handle = settings, handle
    view._writing, view._reading, view._searching = _halves(settings, handle)
    view._owner = False
    return view
