"""What one :class:`~hybrid_memory.HybridMemory` object (a store, or a view of one) acts
on: its settings and the way to its parts. The halves it hands its calls to
(:mod:`.writing`, :mod:`.reading`, :mod:`.searching`) read both under the names its
own methods use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hybrid_memory._memory.parts import NamespaceHandle, StoreHandle, StoreParts
from hybrid_memory._model.filters import Node, parse_filter
from hybrid_memory._model.settings import HybridMemorySettings


class StoreScope:
    """The settings and the parts of one store or view."""

    def __init__(
        self, settings: HybridMemorySettings, handle: StoreHandle | NamespaceHandle
    ) -> None:
        self.settings = settings
        self._handle = handle

    @property
    def _parts(self) -> StoreParts:
        """This store's parts; a namespace view's, opened again if they were closed for
        being the least recently used (see hybrid_memory._memory.parts)."""
        return self._handle.parts()

    def _maybe_sync(self) -> None:
        self._parts.sync.maybe_sync(self.settings.sync_interval)

    def _parse_filter(self, filter: Mapping[str, Any] | None) -> Node | None:
        return parse_filter(filter, single_valued=self._parts.index.single_valued)
