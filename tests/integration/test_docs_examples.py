"""The code on the documentation's start pages runs as written.

Each page's ```python blocks are one program, run in order in a fresh process and an empty
directory, with the default model (offline: the offline-model extra's files) and the real
frameworks, as a reader would paste them. Blocks that include a file of ``examples/``
(``--8<--``) are left to CI's examples step, which runs those files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(
    [DOCS / "index.md", *(DOCS / "start").glob("*.md"), *(DOCS / "concepts").glob("*.md")]
)
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def program(page: Path) -> str:
    blocks = [block for block in BLOCK.findall(page.read_text()) if "--8<--" not in block]
    return "\n".join(blocks)


RUNNABLE = [page for page in PAGES if program(page)]


def test_the_start_pages_have_code_to_run() -> None:
    names = {str(page.relative_to(DOCS)) for page in RUNNABLE}
    assert {
        "start/library.md",
        "start/retriever.md",
        "start/mcp.md",
        "start/langgraph.md",
        "start/llama-index-memory.md",
    } <= names


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: str(page.relative_to(DOCS)))
def test_page_code_runs(page: Path, tmp_path: Path) -> None:
    script = tmp_path / "page.py"
    script.write_text(program(page))
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"{page.name} failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
