"""The public surface: one sorted ``__all__``, a light import, the error tree as drawn."""

from __future__ import annotations

import builtins
import inspect
import re
import subprocess
import sys

import pytest

import hybrid_memory
from hybrid_memory._model import errors as errors

# Every exception class the library defines.
ERRORS = sorted(
    name
    for name, obj in vars(errors).items()
    if inspect.isclass(obj) and issubclass(obj, errors.HybridMemoryError)
)


def test_all_is_sorted_and_unique() -> None:
    assert hybrid_memory.__all__ == sorted(hybrid_memory.__all__)
    assert len(set(hybrid_memory.__all__)) == len(hybrid_memory.__all__)


def test_every_public_name_resolves() -> None:
    for name in hybrid_memory.__all__:
        assert getattr(hybrid_memory, name) is not None, name
    assert hybrid_memory.HybridRetriever.__name__ == "HybridRetriever"


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = hybrid_memory.NoSuchThing  # type: ignore[attr-defined]


def test_public_classes_are_exported() -> None:
    exported = set(hybrid_memory.__all__)
    # every error class and the public result types are reachable from the package
    assert set(ERRORS) <= exported
    assert len(ERRORS) == 10
    assert {"HybridMemory", "HybridMemorySettings", "Hit", "Memory", "SearchResult"} <= exported


def test_one_all_in_the_package_the_implementation_modules_are_private() -> None:
    """The public surface is ``hybrid_memory.__all__``; everything behind it lives in
    private modules (a leading underscore) with no ``__all__`` of their own. ``cli`` (the
    command) and ``testing`` (the benchmarks' and studies' seam) are public tools beside
    the library, not part of it."""
    from pathlib import Path

    root = Path(hybrid_memory.__file__).parent
    public = set()
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if relative.parts[0] == "evaluation":
            continue
        if path.name not in ("__init__.py", "__main__.py") and not any(
            part.startswith("_") for part in relative.parts
        ):
            public.add(str(relative))
        private = relative not in (Path("__init__.py"), Path("cli.py"), Path("testing.py"))
        if private and "__all__ =" in path.read_text():
            pytest.fail(f"{relative} defines __all__: the package has one, in __init__.py")
    assert public == {"cli.py", "testing.py"}


def test_import_does_not_load_the_frameworks() -> None:
    code = (
        "import sys, hybrid_memory\n"
        "heavy = sorted(m for m in sys.modules\n"
        "               if m.split('.')[0] in ('langchain_core', 'llama_index', 'langchain'))\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


# --- the exception tree ------------------------------------------------------------------

_LINE = re.compile(r"^(?P<indent>[\s│├└─]*?)(?P<name>[A-Z]\w*Error)\b(?P<rest>.*)$")


def _drawn_tree() -> dict[str, tuple[str | None, set[str]]]:
    """``{class: (drawn parent, extra builtin bases)}`` from errors.py's docstring."""
    doc = errors.__doc__ or ""
    tree: dict[str, tuple[str | None, set[str]]] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        depth = len(match["indent"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        extras = set(re.findall(r"\((?:also )?([A-Z]\w*)\)", match["rest"]))
        tree[match["name"]] = (parent, extras)
        stack.append((depth, match["name"]))
    return tree


def test_the_docstring_draws_every_error() -> None:
    tree = _drawn_tree()
    assert set(tree) == set(ERRORS)
    assert tree["HybridMemoryError"] == (None, set())


@pytest.mark.parametrize("name", ERRORS)
def test_each_error_has_the_bases_drawn(name: str) -> None:
    parent, extras = _drawn_tree()[name]
    cls = getattr(errors, name)
    expected = [getattr(errors, parent)] if parent else [Exception]
    expected += [getattr(builtins, extra) for extra in extras]
    assert set(cls.__bases__) == set(expected)


def test_error_tree_spot_checks() -> None:
    # Independent of the drawing: the relations callers rely on.
    assert issubclass(errors.InvalidInputError, ValueError)
    assert issubclass(errors.DuplicateIdError, errors.InvalidInputError)
    assert issubclass(errors.DuplicateIdError, ValueError)
    assert issubclass(errors.MemoryNotFoundError, KeyError)
    assert issubclass(errors.EmbeddingMismatchError, errors.EmbeddingError)
    assert issubclass(errors.MissingDependencyError, ImportError)
    assert not issubclass(errors.StoreError, ValueError)
    for name in ERRORS:
        assert issubclass(getattr(errors, name), errors.HybridMemoryError)


def test_error_messages() -> None:
    e = errors.InvalidInputError("tags", "must be a list")
    assert (str(e), e.field) == ("tags: must be a list", "tags")
    d = errors.DuplicateIdError("m1")
    assert d.memory_id == "m1" and d.field == "id"
    assert "'m1'" in str(d) and "upsert=True" in str(d)
    nf = errors.MemoryNotFoundError("m2")
    assert str(nf) == "no memory with id 'm2'"  # not KeyError's quoted repr
    assert nf.memory_id == "m2"
    md = errors.MissingDependencyError("langchain-core", "HybridRetriever")
    assert md.package == "langchain-core"
    assert "pip install langchain-core" in str(md)
    with pytest.raises(KeyError):
        raise errors.MemoryNotFoundError("x")


# --- how the public names show ------------------------------------------------------------


def _public_classes() -> list[type]:
    """The public classes but the retriever, which keeps its module: LangChain serialises
    a retriever under its module path (tests/integration/test_retriever.py checks it)."""
    return [
        obj
        for obj in (getattr(hybrid_memory, name) for name in hybrid_memory.__all__)
        if inspect.isclass(obj) and obj.__name__ != "HybridRetriever"
    ]


def test_public_classes_show_as_hybrid_memory_x() -> None:
    """As in httpx: a traceback names ``hybrid_memory.MemoryNotFoundError``, not the
    private module that defines it."""
    for cls in _public_classes():
        assert cls.__module__ == "hybrid_memory", cls
    code = "import hybrid_memory\nraise hybrid_memory.MemoryNotFoundError('m1')\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == "hybrid_memory.MemoryNotFoundError: no memory with id 'm1'", result.stderr


def test_public_values_pickle_by_their_public_name() -> None:
    import pickle

    from hybrid_memory import AddResult, DeleteReport, Memory, MemoryNotFoundError, StoreError

    memory = Memory("m1", "a text", ("a",), {"k": 1})
    for value in (memory, MemoryNotFoundError("m1"), StoreError("down"), AddResult("m1", "added")):
        data = pickle.dumps(value)
        assert b"hybrid_memory._" not in data, value
        again = pickle.loads(data)
        assert type(again) is type(value)
    assert pickle.loads(pickle.dumps(DeleteReport(["a"]))).ids == ("a",)


def _documented_members(cls: type) -> list[tuple[str, object]]:
    """The public methods and properties a class defines itself (not inherited ones)."""
    members = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__new__", "__call__"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            members.append((name, value))
    return members


def test_every_public_name_has_a_docstring() -> None:
    """Each name of ``__all__``, and each public method and property its classes define,
    says what it is (ruff's pydocstyle rules check the public modules; the core's public
    classes live in private modules, which pydocstyle does not count as public)."""
    missing = []
    for name in hybrid_memory.__all__:
        obj = getattr(hybrid_memory, name)
        if not inspect.getdoc(obj):
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for member, value in _documented_members(obj):
            if member in ("__init__", "__new__"):
                continue  # the class docstring says how to make one
            doc = value.__doc__ if not isinstance(value, property) else value.fget.__doc__
            if not (doc or "").strip():
                missing.append(f"{name}.{member}")
    assert missing == []
