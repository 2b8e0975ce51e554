"""The documentation site names everything public: every setting (its page is generated
from the settings class) and every name of ``hybrid_memory.__all__`` and of the plugins'
``__all__`` (the API reference, rendered from docstrings by mkdocstrings)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

import hybrid_memory
from hybrid_memory import HybridMemorySettings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# The plugins' packages, as the API reference names them (installed by the README's command).
PLUGINS = ["hybrid_memory_mcp", "langgraph.store.hybrid_memory", "llama_index.memory.hybrid_memory"]


def settings_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "settings_page", DOCS / "hooks" / "settings_page.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rendered_settings_page() -> str:
    """docs/settings.md as the build renders it: its markers replaced by the hook."""
    return settings_hook().on_page_markdown((DOCS / "settings.md").read_text())


def api_reference() -> str:
    return "\n".join(page.read_text() for page in sorted((DOCS / "api").glob("*.md")))


def test_settings_page_is_generated_and_names_every_field() -> None:
    source = (DOCS / "settings.md").read_text()
    assert "<!-- settings: hybrid_memory.HybridMemorySettings -->" in source
    page = rendered_settings_page()
    assert "<!-- settings:" not in page
    for name in HybridMemorySettings.model_fields:
        assert f"| `{name}`<br>`HYBRID_MEMORY_{name.upper()}`<br>default: " in page, name


def test_settings_page_shows_defaults_and_allowed_values() -> None:
    page = rendered_settings_page()
    rows = {row.split("`")[1]: row for row in page.splitlines() if row.startswith("| `")}
    assert "default: `60.0` |" in rows["rrf_k"]
    assert "default: `[500, 5000]` |" in rows["alpha_thresholds"]
    assert "default: none |" in rows["path"]
    assert "one of `off`, `boost`, `narrow`" in rows["time_phrases"]
    assert "≥ 1" in rows["k"] and "*Per view:*" in rows["k"]
    assert "*Per view:*" not in rows["path"]
    # Section headings come from the class's "# --- name ---" comments.
    assert "### Where the memories live" in page and "### Search" in page


def test_settings_page_names_the_mcp_servers_fields() -> None:
    mcp = pytest.importorskip("hybrid_memory_mcp")
    page = rendered_settings_page()
    for name in mcp.MCPServerSettings.model_fields:
        assert f"| `{name}`<br>`HYBRID_MEMORY_MCP_{name.upper()}`<br>default: " in page, name


def test_a_table_cell_cannot_break_the_table() -> None:
    cell = settings_hook()._cell("a | b <token>\n  c")
    assert cell == "a \\| b &lt;token> c"


def test_api_reference_names_every_public_name() -> None:
    reference = api_reference()
    missing = [
        name for name in hybrid_memory.__all__ if f"::: hybrid_memory.{name}\n" not in reference
    ]
    lines = ", ".join(f"::: hybrid_memory.{name}" for name in missing)
    assert not missing, f"add to docs/api/*.md: {lines}"


@pytest.mark.parametrize("package", PLUGINS)
def test_api_reference_names_every_public_name_of_each_plugin(package: str) -> None:
    module = pytest.importorskip(package)
    reference = api_reference()
    missing = [name for name in module.__all__ if f"::: {package}.{name}\n" not in reference]
    assert not missing, f"add to docs/api/*.md: {', '.join(missing)}"


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {
        str(page.relative_to(DOCS))
        for page in DOCS.rglob("*.md")
        if "hooks" not in page.relative_to(DOCS).parts
    }
    listed = set(re.findall(r":\s+([\w./-]+\.md)\s*$", nav, re.MULTILINE))
    assert pages == listed


def test_the_reference_names_only_what_exists() -> None:
    for package, name in re.findall(r"^::: ([\w.]+)\.(\w+)$", api_reference(), re.MULTILINE):
        assert hasattr(importlib.import_module(package), name), f"{package}.{name}"


def test_docstring_roles_read_as_code() -> None:
    spec = importlib.util.spec_from_file_location("roles", DOCS / "hooks" / "sphinx_roles.py")
    assert spec and spec.loader
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    html = (
        "<p>Over a :class:<code>~hybrid_memory.HybridMemory</code>, "
        "see :meth:<code>sync</code> ::</p>"
    )
    assert roles.on_page_content(html) == (
        "<p>Over a <code>HybridMemory</code>, see <code>sync</code>:</p>"
    )
