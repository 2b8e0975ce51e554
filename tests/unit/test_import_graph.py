"""The import graphs of ``hybrid_memory`` and of the evaluation harness
(``hybrid_memory_eval``, a distribution of its own): no cycles, and the core reaches no
harness.

The graph is read from the source with ``ast``: every ``import`` in a module, at the top
or inside a function (a lazy import is still a dependency), except under
``if TYPE_CHECKING:`` (never run). An import names the deepest module of this package it
reaches: ``from hybrid_memory_eval.runs import Run`` is an edge to
``hybrid_memory_eval.runs``, ``from hybrid_memory import cli`` to ``hybrid_memory.cli``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import hybrid_memory

PACKAGE = "hybrid_memory"
EVALUATION = "hybrid_memory_eval"
REPO = Path(__file__).resolve().parents[2]
EVALUATION_ROOT = REPO / "benchmarks" / "evaluation" / EVALUATION


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function: runs when called, not when the module loads


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under the package folder ``root``."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _deepest(name: str, modules: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def edges_of(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """The imports of ``module`` that reach a module of the package."""
    is_package = path.name == "__init__.py"
    edges: list[Edge] = []

    def add(name: str, line: int, lazy: bool) -> None:
        target = _deepest(name, modules)
        if target is not None and target != module:
            edges.append(Edge(module, target, line, lazy))

    def visit(nodes: list[ast.stmt], lazy: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno, lazy)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    anchor = module.split(".")
                    anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    add(full if full in modules else base, node.lineno, lazy)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse, lazy)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True)
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        for child in children:  # statements, except handlers, match cases
                            visit([child] if isinstance(child, ast.stmt) else child.body, lazy)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)).body, False)
    return edges


def import_graph(root: Path, package: str) -> list[Edge]:
    modules = modules_of(root, package)
    return [edge for name, path in modules.items() for edge in edges_of(name, path, modules)]


def find_cycle(edges: list[Edge]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None when the graph is acyclic."""
    graph: dict[str, list[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge.target)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = dfs(start)
            if found:
                return found
    return None


ROOT = Path(hybrid_memory.__file__).resolve().parent


def test_the_package_has_no_import_cycle() -> None:
    edges = import_graph(ROOT, PACKAGE)
    assert len({e.source for e in edges}) > 10  # the walk did see the package
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_harness_has_no_import_cycle() -> None:
    edges = import_graph(EVALUATION_ROOT, EVALUATION)
    assert len({e.source for e in edges}) > 5
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_core_holds_and_imports_no_harness() -> None:
    assert not (ROOT / "evaluation").exists()
    harness_imports = []
    for name, path in modules_of(ROOT, PACKAGE).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            harness_imports += [f"{name} -> {n}" for n in names if n.startswith(EVALUATION)]
    assert harness_imports == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_finds_a_cycle_through_a_lazy_or_main_block_import(tmp_path: Path) -> None:
    # The shape the harness had: cli imports eval in a function, eval's __main__ block
    # imports cli. TYPE_CHECKING imports and relative imports are handled too.
    pkg = tmp_path / "pkg"
    _write(
        pkg,
        {
            "__init__.py": "from .core import Store\n",
            "core.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg import Store\nclass Store: ...\n",
            "cli.py": "def main():\n    from pkg.tools.eval import run\n    return run()\n",
            "tools/__init__.py": "",
            "tools/eval.py": "from ..core import Store\ndef run(): ...\n"
            "if __name__ == '__main__':\n    from pkg.cli import main\n",
        },
    )
    edges = import_graph(pkg, "pkg")
    found = {(e.source, e.target, e.lazy) for e in edges}
    assert ("pkg.cli", "pkg.tools.eval", True) in found
    assert ("pkg.tools.eval", "pkg.core", False) in found
    assert ("pkg.tools.eval", "pkg.cli", False) in found
    assert not any(e.source == "pkg.core" for e in edges)  # TYPE_CHECKING only
    cycle = find_cycle(edges)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"pkg.cli", "pkg.tools.eval"}

    (pkg / "tools" / "eval.py").write_text("from ..core import Store\ndef run(): ...\n")
    assert find_cycle(import_graph(pkg, "pkg")) is None


def test_import_and_the_cli_front_load_no_harness_and_no_framework() -> None:
    code = (
        "import sys, hybrid_memory, hybrid_memory.cli as cli\n"
        "cli.build_parser(list(cli.plugin_commands())).format_help()\n"
        "print(sorted(m for m in sys.modules if m.startswith('hybrid_memory_eval')\n"
        "             or m.split('.')[0].startswith('langchain')\n"
        "             or m.split('.')[0] == 'llama_index'))\n"
        "import hybrid_memory_eval\n"  # and the check above can see it when loaded
        "print('hybrid_memory_eval.harness' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split("\n")[:2] == ["[]", "True"], result.stdout


def test_the_shared_test_fixtures_need_nothing_from_the_benchmarks() -> None:
    """The core's tests run without the ``benchmarks`` folder: the fixtures all tests load
    (``tests/conftest.py``) import none of it (a study's own tests may)."""
    code = (
        "import sys, tests.conftest\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'benchmarks')\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
