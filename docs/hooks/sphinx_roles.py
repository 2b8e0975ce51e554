"""MkDocs hook: the reStructuredText habits of the docstrings, read as Markdown.

The docstrings are written for ``help()`` and editors as much as for this site, in the
reStructuredText manner of the Python docs: cross-reference roles
(``:class:`~hybrid_memory.HybridMemory```) and a paragraph ending in ``::`` before a
code example. Markdown shows those literally; in the rendered API pages the role is
dropped (the name stays as code, ``~`` keeping only its last part, as Sphinx does) and
``::`` becomes ``:``.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|meth|func|mod|attr|exc|data|obj):<code>(~?)([^<]*)</code>")
LITERAL_BLOCK_MARK = re.compile(r"\s?::</p>")


def on_page_content(html: str, **_: Any) -> str:
    """Drop the roles and the literal-block marks from a rendered page."""
    return LITERAL_BLOCK_MARK.sub(":</p>", ROLE.sub(_role, html))


def _role(found: re.Match[str]) -> str:
    short, name = found.groups()
    return f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"
