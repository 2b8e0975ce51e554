"""The core's house rules, read from the code: sub-packages import only in the stated
direction (each package's docstring says what it may import), and the top of
``hybrid_memory/`` stays small."""

from __future__ import annotations

import ast
from pathlib import Path

import hybrid_memory

PACKAGE = Path(hybrid_memory.__file__).parent

# What each part may import besides itself, bottom to top; a part imports only parts
# listed before it, so the direction has no cycle. The edge (the retriever, the commands,
# the public face) may import anything below it.
ALLOWED: dict[str, set[str]] = {
    "_model": set(),
    "_process": {"_model"},
    "_embedding": {"_model", "_process"},
    "_keyword": {"_model", "_process"},
    "_shared_path": {"_model", "_process"},
    "_store": {"_model", "_process", "_embedding", "_keyword", "_shared_path"},
    "_search": {"_model", "_process", "_embedding", "_keyword", "_store"},
}
ALLOWED["_memory"] = set(ALLOWED) - {"_memory"}
ALLOWED["_transfer"] = set(ALLOWED) - {"_transfer"}
ALLOWED["_retriever"] = {"_memory", "_model"}
ALLOWED["_commands"] = {"_memory", "_model", "_transfer"}
# The seam of the benchmarks and studies (hybrid_memory.testing) reaches what they measure.
ALLOWED["testing"] = set(ALLOWED) - {"_commands", "testing"}
ALLOWED["cli"] = {"_commands"}
ALLOWED["__main__"] = {"cli"}
ALLOWED["__init__"] = {"_memory", "_model", "_transfer", "_retriever"}


def part_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported_parts(path: Path) -> set[tuple[str, int]]:
    """The parts of hybrid_memory a module imports, anywhere in it (functions and
    TYPE_CHECKING blocks included), with the line."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "hybrid_memory":
                names = [f"hybrid_memory.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "hybrid_memory" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


def test_every_import_between_parts_follows_the_stated_direction() -> None:
    against = []
    for path in sorted(PACKAGE.rglob("*.py")):
        part = part_of(path)
        assert part in ALLOWED, f"{path.relative_to(PACKAGE)}: a part the layout test does not know"
        for target, line in imported_parts(path):
            if target != part and target not in ALLOWED[part]:
                against.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
    assert not against, "imports against the stated direction:\n" + "\n".join(against)


def test_the_direction_has_no_cycle() -> None:
    done: set[str] = set()

    def visit(part: str, trail: tuple[str, ...]) -> None:
        assert part not in trail, " -> ".join((*trail, part))
        if part not in done:
            for below in ALLOWED[part]:
                visit(below, (*trail, part))
            done.add(part)

    for part in ALLOWED:
        visit(part, ())


def module_name(path: Path) -> str:
    parts = ["hybrid_memory", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of hybrid_memory a module imports, anywhere in it (functions and
    TYPE_CHECKING blocks included): each import names the deepest module it reaches."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts:
                found.add(".".join(parts))
    return found


def find_module_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    trail: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        trail.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*trail[trail.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        trail.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_module_imports_itself_back_through_others() -> None:
    """No cycle between modules, not even through an import made only for type checking
    or inside a function: each is a module that cannot be read without the other."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {name: module_imports(path, set(paths)) - {name} for name, path in paths.items()}
    assert sum(len(targets) for targets in graph.values()) > 100  # the walk saw the imports
    cycle = find_module_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_sees_imports_for_type_checking_and_in_functions(
    tmp_path: Path,
) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from hybrid_memory.a import A\n"
        "def f():\n    import hybrid_memory.b.c\n"
    )
    modules = {"hybrid_memory.a", "hybrid_memory.b", "hybrid_memory.b.c"}
    assert module_imports(module, modules) == {"hybrid_memory.a", "hybrid_memory.b.c"}
    graph = {"a": {"b"}, "b": {"c"}, "c": set()}
    assert find_module_cycle(graph) is None
    graph["c"].add("a")
    assert find_module_cycle(graph) == ["a", "b", "c", "a"]


def test_each_sub_package_says_what_it_holds_and_may_import() -> None:
    for init in sorted(PACKAGE.glob("_*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.parent.name} has no docstring"
        if init.parent.name != "_commands":
            assert "May import:" in doc, f"{init.parent.name}'s docstring does not say"


def test_the_top_of_the_package_stays_small() -> None:
    entries = [p for p in PACKAGE.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 15, sorted(p.name for p in entries)


REPO = PACKAGE.parent
# What reaches into the library from beside it: the benchmarks and studies through
# hybrid_memory.testing at most, the plugins and examples through the public API only.
OUTSIDE = {"benchmarks": "hybrid_memory.testing", "integrations": None, "examples": None}


def reaches_inside(path: Path, seam: str | None) -> list[str]:
    """Where a file beside the library imports ``hybrid_memory._anything`` (or the seam,
    where it may not), an import by name included (``importlib.import_module``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if node.module != "hybrid_memory":
                names.append(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value] if node.value.startswith("hybrid_memory.") else []
        for name in names:
            parts = name.split(".")
            if parts[0] != "hybrid_memory" or len(parts) < 2:
                continue
            if parts[1].startswith("_") or (parts[1] == "testing" and seam is None):
                found.append(f"{path}:{node.lineno}: {name}")
    return found


def test_benchmarks_plugins_and_examples_stay_outside() -> None:
    reached = []
    for folder, seam in OUTSIDE.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            reached += reaches_inside(path, seam)
    assert not reached, "\n".join(reached)


def test_the_outside_check_sees_each_way_in(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    for line in (
        "from hybrid_memory._model.filters import parse_filter",
        "import hybrid_memory._keyword.bm25",
        "from hybrid_memory import _retriever",
        "importlib.import_module('hybrid_memory._search.legs')",
    ):
        module.write_text(line + "\n")
        assert reaches_inside(module, "hybrid_memory.testing"), line
    module.write_text("from hybrid_memory.testing import query_words\n")
    assert reaches_inside(module, None)
    assert not reaches_inside(module, "hybrid_memory.testing")
    module.write_text("from langgraph.store.hybrid_memory._filters import passes\n")
    assert not reaches_inside(module, None)
