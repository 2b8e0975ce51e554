"""A settings error as a user reads it: :class:`InvalidInputError` naming the environment
variable and the field at fault, what is wrong and the value given."""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_settings import SettingsError

from hybrid_memory._model.errors import InvalidInputError


def settings_error(exc: ValidationError, prefix: str) -> InvalidInputError:
    """The first invalid field of a settings class whose variables start with ``prefix``."""
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    name = loc[0] if loc else "settings"
    field = f"{prefix}{name.upper()} ({name})" if loc else "settings"
    value = first.get("input")
    shown = "" if isinstance(value, dict) else f"; got {value!r}"
    message = first.get("msg", str(exc)).removeprefix("Value error, ")
    return InvalidInputError(field, f"{message}{shown}")


def source_error(exc: SettingsError, prefix: str) -> InvalidInputError:
    """A list variable that is not valid JSON (pydantic-settings names only the field)."""
    match = re.search(r'field "(\w+)"', str(exc))
    name = match.group(1) if match else "settings"
    return InvalidInputError(
        f"{prefix}{name.upper()} ({name})",
        "list values are written as JSON, for example '[500, 5000]'",
    )
