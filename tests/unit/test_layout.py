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
    "_write": {"_model", "_process", "_embedding", "_keyword", "_store"},
}
ALLOWED["_memory"] = set(ALLOWED) - {"_memory"}
ALLOWED["_transfer"] = set(ALLOWED) - {"_transfer"}
ALLOWED["_retriever"] = {"_memory", "_model"}
ALLOWED["_commands"] = {"_memory", "_model", "_transfer"}
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


def test_each_sub_package_says_what_it_holds_and_may_import() -> None:
    for init in sorted(PACKAGE.glob("_*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.parent.name} has no docstring"
        if init.parent.name != "_commands":
            assert "May import:" in doc, f"{init.parent.name}'s docstring does not say"


def test_the_top_of_the_package_stays_small() -> None:
    entries = [p for p in PACKAGE.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 15, sorted(p.name for p in entries)
