"""Public operations that survive a damaged keyword index (the index is derived data:
rebuilt from the collection, and the operation run again, once)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from hybrid_memory._model.errors import StoreError

_F = TypeVar("_F", bound=Callable[..., Any])


def repairing(method: _F) -> _F:
    """A public operation that survives a damaged keyword index: the index is derived
    data, so when SQLite finds its file damaged (truncated, overwritten, deleted under
    this process), the index is rebuilt from the collection and the operation runs
    again, once (what is damage and what to do is decided in one place,
    :meth:`IndexSync.recover`). Writes never run twice: the writer has the index
    recovered itself after the collection took a write. A namespace view's parts are
    held open for the whole operation (never closed under it for being little used)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._handle.lease():
            return _once_more_after_repair(method, self, *args, **kwargs)

    return run  # type: ignore[return-value]


def _once_more_after_repair(
    method: Callable[..., Any], self: Any, *args: Any, **kwargs: Any
) -> Any:
    try:
        return method(self, *args, **kwargs)
    except sqlite3.DatabaseError as exc:
        self._parts.sync.recover(exc)
    try:
        return method(self, *args, **kwargs)
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"the keyword index {self._parts.index.path} failed again after a rebuild: "
            f"{exc}; check the disk, or delete the file (it is rebuilt from the collection)"
        ) from exc
