"""MkDocs hook: the settings pages, generated from the settings classes themselves.

A page holds a marker line such as ``<!-- settings: hybrid_memory.HybridMemorySettings -->``;
at build time the marker becomes a table per section of the class (``# --- name ---``
comments in its source): every field with its environment variable, its default, what
values it takes and its ``description``. A field added to the class is on the page at the
next build, so the page cannot drift from the code (``tests/unit/test_docs.py`` checks it
names every field).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import sys
import types
import typing
from typing import Any

MARKER = re.compile(r"^<!-- settings: ([\w.]+) -->$", re.MULTILINE)
SECTION = re.compile(r"^\s+# --- (.+?) -+\s*$")
FIELD = re.compile(r"^\s{4}(\w+): ")
CONSTRAINTS = {
    "ge": "≥ {}",
    "gt": "> {}",
    "le": "≤ {}",
    "lt": "< {}",
    "min_length": "at least {} characters",
    "max_length": "at most {} characters",
    "pattern": "matching `{}`",
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each settings marker of a page with the generated tables."""
    return MARKER.sub(lambda found: settings_markdown(_load(found.group(1))), markdown)


def settings_markdown(settings_class: type) -> str:
    """Markdown tables of every field of a pydantic-settings class, by section."""
    prefix = settings_class.model_config.get("env_prefix", "")  # type: ignore[attr-defined]
    per_view = getattr(_defining_module(settings_class), "SEARCH_SETTINGS", frozenset())
    fields = settings_class.model_fields  # type: ignore[attr-defined]
    out: list[str] = []
    for section, names in _sections(settings_class, list(fields)):
        if section:
            out += [f"### {section[0].upper()}{section[1:]}", ""]
        out += ["| setting, environment variable, default | meaning |", "|---|---|"]
        for name in names:
            info = fields[name]
            meaning = _cell(info.description or "")
            allowed = _allowed(info)
            if allowed:
                meaning += f" <br>*Allowed:* {allowed}."
            if name in per_view:
                meaning += " <br>*Per view:* `with_settings()` may change it."
            setting = f"`{name}`<br>`{prefix}{name.upper()}`<br>default: {_default(info)}"
            out.append(f"| {setting} | {meaning} |")
        out.append("")
    return "\n".join(out)


def _load(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    found: type = getattr(importlib.import_module(module), name)
    return found


def _defining_module(cls: type) -> types.ModuleType:
    """The module whose source defines ``cls``. A public class may show as its package
    (``hybrid_memory.HybridMemorySettings``: its ``__module__``, as httpx sets it) while it
    is defined in a private module of the package, where ``inspect`` does not look."""
    package = cls.__module__
    for name, module in sorted(sys.modules.items()):
        if name != package and not name.startswith(package + "."):
            continue
        if getattr(module, cls.__name__, None) is not cls:
            continue
        source = inspect.getsource(module) if getattr(module, "__file__", None) else ""
        if re.search(rf"^class {cls.__name__}\b", source, re.MULTILINE):
            return module
    return sys.modules[package]


def _class_source(cls: type) -> str:
    """The source of the class ``cls``, read from the module that defines it."""
    source = inspect.getsource(_defining_module(cls))
    found = next(
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__
    )
    return "\n".join(source.splitlines()[found.lineno - 1 : found.end_lineno])


def _sections(settings_class: type, names: list[str]) -> list[tuple[str, list[str]]]:
    """The fields grouped under the ``# --- section ---`` comments of the class source,
    in source order; fields the source does not show (inherited) come last."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    seen: set[str] = set()
    for line in _class_source(settings_class).splitlines():
        if heading := SECTION.match(line):
            sections.append((heading.group(1), []))
        elif (field := FIELD.match(line)) and field.group(1) in names:
            sections[-1][1].append(field.group(1))
            seen.add(field.group(1))
    sections[-1][1].extend(name for name in names if name not in seen)
    return [(title, fields) for title, fields in sections if fields]


def _default(info: Any) -> str:
    value = info.default_factory() if info.default_factory is not None else info.default
    if value is None:
        return "none"
    if hasattr(value, "get_secret_value"):
        return "(secret)"
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f"`{value}`"


def _allowed(info: Any) -> str:
    parts = []
    choices = _literal_choices(info.annotation)
    if choices:
        parts.append("one of " + ", ".join(f"`{choice}`" for choice in choices))
    else:
        parts.append(_type_name(info.annotation))
    for constraint in info.metadata:
        for attribute, form in CONSTRAINTS.items():
            value = getattr(constraint, attribute, None)
            if value is not None:
                parts.append(form.format(_cell(str(value))))
    return ", ".join(part for part in parts if part)


def _literal_choices(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return []


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [_type_name(a) for a in arguments if a is not type(None)]
        nullable = type(None) in arguments
        return " or ".join(kinds) + (" or none" if nullable else "")
    if origin is list:
        plural = {int: "integers", float: "numbers", str: "strings"}
        return "a JSON list" + (f" of {plural.get(arguments[0], 'values')}" if arguments else "")
    names = {bool: "true or false", int: "an integer", float: "a number", str: "text"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (no column break, no stray HTML tag)."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")
