"""Strict tool arguments: what a tool accepts is exactly its advertised JSON schema.

The SDK builds each tool's input schema from the function's signature and validates
calls with pydantic, but it ignores unknown arguments (an LLM that writes ``limit`` or
``n_results`` silently gets the default) and answers a wrong type with pydantic's own
text and a link. :class:`StrictTool` closes both gaps: the schema says
``additionalProperties: false``, an unknown argument is refused naming it and the
allowed ones, and a wrong value is answered in the library's words, naming the field
and what it accepts, as read from the schema the client was shown. Fields inside a list
of objects are named by position (``memories[3].tags``), and an object's unknown field is
refused like an unknown argument. Object types are written out in place rather than
referenced (``$ref``), so the schema a client reads is self-contained.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.types import ToolAnnotations
from pydantic import ValidationError

__all__ = ["StrictTool", "describe", "explain"]

# Names other memory servers and LLMs use for an argument, and what it is called here.
SYNONYMS = {
    "limit": "k",
    "n_results": "k",
    "top_k": "k",
    "num_results": "k",
    "max_results": "k",
    "n": "k",
    "content": "text",
    "memory": "text",
    "where": "filter",
    "metadata_filter": "filter",
    "memory_id": "id",
    "page_size": "limit",
    "skip": "offset",
    "items": "memories",
}
_SHOWN_INPUT = 80  # characters of a refused value shown back


class StrictTool(Tool):
    """A tool whose arguments must match its schema exactly (see the module)."""

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        *,
        title: str,
        annotations: ToolAnnotations,
        bounds: Mapping[str, Mapping[str, float]] | None = None,
    ) -> StrictTool:
        """The tool for ``fn``: described by its docstring without the indentation, and
        ``bounds`` (``{"k": {"maximum": 100}}``, for limits known only at run time)
        added to the advertised schema."""
        tool = cls.from_function(
            fn,
            title=title,
            description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=annotations,
        )
        assert isinstance(tool, StrictTool)
        tool.parameters = _inlined(tool.parameters)
        tool.parameters["additionalProperties"] = False
        for field, limits in (bounds or {}).items():
            _numeric_part(tool.parameters["properties"][field]).update(limits)
        return tool

    @property
    def allowed(self) -> list[str]:
        """The names of the arguments the tool takes."""
        return list(self.parameters.get("properties", {}))

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        """Run the tool, refusing an argument it does not take (naming the ones it does)."""
        unknown = [name for name in arguments if name not in self.allowed]
        if unknown:
            raise ToolError(f"Error executing tool {self.name}: {self._unknown(unknown)}")
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                message = explain(exc.__cause__, self.parameters)
                raise ToolError(f"Error executing tool {self.name}: {message}") from None
            raise

    def _unknown(self, names: Sequence[str]) -> str:
        listed = ", ".join(repr(n) for n in names)
        hints = [f"for {n!r} use {SYNONYMS[n]!r}" for n in names if SYNONYMS.get(n) in self.allowed]
        hint = f" ({'; '.join(hints)})" if hints else ""
        noun = "argument" if len(names) == 1 else "arguments"
        return (
            f"unknown {noun} {listed}{hint}; {self.name} takes only: "
            f"{', '.join(self.allowed) or 'no arguments'}. Nothing was done."
        )


def explain(error: ValidationError, schema: Mapping[str, Any]) -> str:
    """The validation failures as ``field: expected <what the schema allows>, got <value>``,
    one per field; a field inside a list of objects is named ``memories[3].tags``."""
    properties = schema.get("properties", {})
    messages: dict[str, str] = {}
    for failure in error.errors(include_url=False):
        location = failure.get("loc", ())
        if not location:
            continue
        field = str(location[0])
        part: Mapping[str, Any] = properties.get(field, {})
        path = field
        for step in location[1:]:
            if isinstance(step, int):
                path += f"[{step}]"  # an item of a list
                part = _items(part)
                continue
            inner = _object(part).get("properties", {})
            if step not in inner:
                break  # a union member's name (str, int, ...) or an unknown field
            path += f".{step}"  # a field of an object
            part = inner[step]
        if failure["type"] == "extra_forbidden":
            name = str(location[-1])
            messages[f"{path}.{name}"] = _unknown_field(path, name, _object(part))
            continue
        if path in messages or field in messages:
            continue
        if failure["type"] == "missing":
            messages[path] = f"{path}: required, {describe(part)}"
        elif failure["type"] in ("too_long", "too_short") and isinstance(failure["input"], list):
            count = len(failure["input"])  # the count says it; the items would not
            messages[path] = f"{path}: expected {describe(part)}, got {count} items"
        else:
            messages[path] = f"{path}: expected {describe(part)}, got {_shown(failure['input'])}"
    return "; ".join(messages.values()) or str(error)


def _unknown_field(path: str, name: str, schema: Mapping[str, Any]) -> str:
    allowed = list(schema.get("properties", {}))
    hint = f" (for {name!r} use {SYNONYMS[name]!r})" if SYNONYMS.get(name) in allowed else ""
    return f"{path}: unknown field {name!r}{hint}; it takes only: {', '.join(allowed)}"


def describe(schema: Mapping[str, Any]) -> str:
    """What a JSON schema accepts, in words: ``an integer in 1..100 or null``."""
    if "anyOf" in schema:
        return " or ".join(describe(option) for option in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return "a string"
    if kind in ("integer", "number"):
        return ("an integer" if kind == "integer" else "a number") + _range(schema)
    if kind == "boolean":
        return "true or false"
    if kind == "null":
        return "null"
    if kind == "array":
        return f"a list of {_count(schema)}{_plural(describe(schema.get('items', {})))}"
    if kind == "object":
        return "an object"
    return "a value"


def _range(schema: Mapping[str, Any]) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return (
            f" in {_num(low)}..{_num(high)}"
            if schema.get("type") == "integer"
            else (f" in [{_num(low)}, {_num(high)}]")
        )
    if low is not None:
        return f" of at least {_num(low)}"
    if high is not None:
        return f" of at most {_num(high)}"
    return ""


def _count(schema: Mapping[str, Any]) -> str:
    """``1..1000 `` for a list with both bounds, else nothing."""
    low, high = schema.get("minItems"), schema.get("maxItems")
    return f"{low}..{high} " if low is not None and high is not None else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _plural(phrase: str) -> str:
    for article in ("an ", "a "):
        if phrase.startswith(article):
            noun, _, rest = phrase[len(article) :].partition(" ")
            return f"{noun}s" + (f" {rest}" if rest else "")
    return phrase


def _items(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    if "items" in schema:
        return schema["items"]
    for option in schema.get("anyOf", ()):
        if "items" in option:
            return option["items"]
    return {}


def _object(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object member of a field's schema (``anyOf`` with null, or itself)."""
    for option in schema.get("anyOf", ()):
        if "properties" in option:
            return option
    return schema


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``{"$ref": "#/$defs/Name"}`` replaced by that definition
    (pydantic's output for a model inside a list), and no ``$defs`` left. The tools'
    models do not refer to themselves, so the result is finite."""
    definitions = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                return resolve({**definitions[ref.removeprefix("#/$defs/")], **siblings})
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _numeric_part(schema: dict[str, Any]) -> dict[str, Any]:
    """The integer or number member of a field's schema (``anyOf`` with null, or itself)."""
    for option in schema.get("anyOf", ()):
        if option.get("type") in ("integer", "number"):
            return option
    return schema


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_INPUT else text[: _SHOWN_INPUT - 3] + "..."
