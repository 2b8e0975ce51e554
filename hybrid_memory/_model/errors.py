"""The exception family of hybrid-memory, drawn in one place.

HybridMemoryError
├── InvalidInputError (also ValueError)    bad arguments; nothing was stored or changed
│   └── DuplicateIdError                   add() of an id that exists, without upsert
├── MemoryNotFoundError (also KeyError)    get/update/related of an id that does not exist
├── EmbeddingError                         the embedding model failed or is unavailable
│   └── EmbeddingMismatchError             the store was built with another model / dimension
├── StoreError                             Chroma or the keyword index failed underneath
│   ├── IndexFileError                     the keyword index's file cannot be used; says what to do
│   └── StoreNotFoundError (also LookupError)  opened with create=False: no such store or namespace
└── MissingDependencyError (ImportError)   an optional package is needed; says what to install
"""

from __future__ import annotations

import copyreg
from collections.abc import Sequence
from typing import Any

# How many ids an error names before it says how many more there are.
_IDS_NAMED = 10


class HybridMemoryError(Exception):
    """Base class of every error hybrid-memory raises on purpose.

    Every error of the family survives pickling (a process pool, a multiprocessing queue,
    a distributed task runner hands it on): Python pickles an exception as its class
    called with its ``args`` again, which fails for the errors whose constructor takes
    other arguments than their message. These are made again as ``cls.__new__(cls,
    *args)`` (which sets ``args`` without calling the constructor) with their attributes
    restored; the pickle names the public class only."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (copyreg.__newobj__, (type(self), *self.args), self.__dict__)  # type: ignore[attr-defined]


class InvalidInputError(HybridMemoryError, ValueError):
    """An argument is invalid. The message names the field and what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class DuplicateIdError(InvalidInputError):
    """A memory with this id already exists and the call did not ask for upsert."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            "id", f"a memory with id {memory_id!r} already exists; pass upsert=True to replace it"
        )


class MemoryNotFoundError(HybridMemoryError, KeyError):
    """No memory has the given id. ``memory_id``: the (first) id not found;
    ``memory_ids``: every id not found, in the order asked (a call on several ids that
    names them all, as ``delete``)."""

    def __init__(self, memory_id: str, *more: str) -> None:
        self.memory_id = memory_id
        self.memory_ids: tuple[str, ...] = (memory_id, *more)
        super().__init__(memory_id)

    @classmethod
    def of(cls, memory_ids: Sequence[str]) -> MemoryNotFoundError:
        """The error naming each of ``memory_ids`` (at least one) that was not found."""
        return cls(*memory_ids)

    def __str__(self) -> str:
        ids = self.memory_ids
        if len(ids) == 1:
            return f"no memory with id {self.memory_id!r}"
        named = ", ".join(repr(i) for i in ids[:_IDS_NAMED])
        rest = f" and {len(ids) - _IDS_NAMED} more" if len(ids) > _IDS_NAMED else ""
        return f"no memory with ids {named}{rest}"


class EmbeddingError(HybridMemoryError):
    """The embedding model could not embed the given texts."""


class EmbeddingMismatchError(EmbeddingError):
    """The collection was written with a different embedding model or dimension."""


class StoreError(HybridMemoryError):
    """The vector store or the keyword index failed."""


class StoreNotFoundError(StoreError, LookupError):
    """The store or namespace a call opened with ``create=False`` does not exist: nothing
    was created. ``where`` names it (a path, a collection, a namespace)."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(message)


#: The name this library is installed by (``pip install hybrid-agent-memory``); the import
#: name and the command stay ``hybrid_memory`` and ``hybrid-memory``. The index's
#: ``hybrid-memory`` is an unrelated project (it installs only a ``scripts`` package).
DISTRIBUTION = "hybrid-agent-memory"


class IndexFileError(StoreError):
    """A file of the keyword index cannot be used (a directory where the file should be,
    a device, no permission): what the library cannot repair by itself, since the fix
    touches something it did not make. ``path`` names the file; the message says what
    to do. The index is derived from the collection: removing the file loses nothing."""

    def __init__(self, path: str, problem: str, remedy: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}; {remedy}")


class MissingDependencyError(HybridMemoryError, ImportError):
    """An optional dependency is not installed; the message gives the pip command."""

    def __init__(self, package: str, purpose: str, extra: str | None = None) -> None:
        self.package = package
        command = f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{purpose} needs the {package!r} package: {command}")
