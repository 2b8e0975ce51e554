"""The search half of :class:`~hybrid_memory.HybridMemory`: a query (or a stored memory,
for ``related``) checked and planned (its time scope, a keyword index still warming),
then handed to the store's searcher (the public methods' docstrings say what each
does)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from hybrid_memory._memory.repairing import repairing
from hybrid_memory._memory.scope import StoreScope
from hybrid_memory._model.inputs import (
    valid_alpha,
    valid_id,
    valid_k,
    valid_max_tokens,
    valid_mmr,
    valid_tags,
    valid_text,
)
from hybrid_memory._model.results import SearchResult
from hybrid_memory._model.times import now_timestamp, to_timestamp
from hybrid_memory._search.searcher import Query
from hybrid_memory._search.time_scope import plan_time


class Searching(StoreScope):
    """Searches of one store or view."""

    @repairing
    def search(
        self,
        query: str,
        *,
        k: int | None,
        filter: Mapping[str, Any] | None,
        tags: Iterable[str] | None,
        alpha: float | None,
        now: datetime | str | float | None,
        max_tokens: int | None,
        after: datetime | str | float | None,
        before: datetime | str | float | None,
        mmr: float | None,
    ) -> SearchResult:
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
        k: int | None,
        filter: Mapping[str, Any] | None,
        after: datetime | str | float | None,
        before: datetime | str | float | None,
    ) -> SearchResult:
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
