"""Checks shared by every entry point that takes strings from a caller."""

from __future__ import annotations

from hybrid_memory._model.errors import InvalidInputError


def encodable(value: str, field: str) -> str:
    """``value`` if it can be stored (UTF-8: Chroma, SQLite and the embedding model all
    need it), else InvalidInputError. Python strings may hold lone surrogates
    (``"\\ud800"``, from a broken decode), which no UTF-8 store accepts."""
    if value.isascii():  # no surrogate possible; the common case, checked without a copy
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            field,
            f"not valid Unicode text: lone surrogate {value[exc.start]!r} at position "
            f"{exc.start} (decode the source with errors='replace' or fix its encoding)",
        ) from None
    return value
