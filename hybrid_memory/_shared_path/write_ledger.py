"""Which writes to an embedded path touched which namespace, as its owner counts them.

The owner of a path (:mod:`hybrid_memory._shared_path.ownership`) sees every write made to it: its
own stores' and those it runs for the other processes on the path. Each is counted here
under what it can touch: a namespace's share (its key), a whole collection
(``"=" + name``), or, for a write whose target the owner does not read (one run for
another process), ``None``, which may touch anything.

A namespace closed while its keyword index was in step with its share, at a count
:meth:`WriteLedger.mark` gave, is in step when opened again if the mark is unchanged: no
write that could touch it began since (and none was in flight then). Reading its share
again from Chroma to find that out costs a scan of the shared collection, most of a
search of a namespace opened again.
"""

from __future__ import annotations

import threading
from collections import Counter

# The key of a write whose target is not known: it may touch any namespace.
ANY = None


def collection_key(name: str) -> str:
    """The key of a write to Chroma collection ``name`` as a whole (not a share of it)."""
    return "=" + name


class WriteLedger:
    """Writes begun and in flight, by what they can touch (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._begun: Counter[str | None] = Counter()
        self._in_flight: Counter[str | None] = Counter()

    def begin(self, key: str | None) -> None:
        """A write that can touch ``key`` (``None``: anything) is about to be made."""
        with self._lock:
            self._begun[key] += 1
            self._in_flight[key] += 1

    def end(self, key: str | None) -> None:
        """That write is done (applied or failed): every later read sees it, if applied."""
        with self._lock:
            self._in_flight[key] -= 1

    def mark(self, *keys: str) -> int | None:
        """How many writes that can touch any of ``keys`` began so far; None while one of
        them is in flight (it may commit after a read that this mark would vouch for)."""
        with self._lock:
            touching = (*keys, ANY)
            if any(self._in_flight[k] for k in touching):
                return None
            return sum(self._begun[k] for k in touching)
