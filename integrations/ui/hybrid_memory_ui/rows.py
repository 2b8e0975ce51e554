"""The rows of the lists (memories on the browse page, hits on the search page) as HTML,
built here rather than in a template: a page holds 50 to 100 of them, each with its
links and chips, and a template loop spends several milliseconds on what string joins do
in one. Every value goes through :func:`markupsafe.escape`; the only markup is ours."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

from hybrid_memory import Hit, Memory
from hybrid_memory_ui.render import format_time, format_value


def _link(path: str, **params: str) -> str:
    """``path?a=1&amp;b=2`` of the params that have a value, escaped for an attribute."""
    query = "&amp;".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v)
    return f"{path}?{query}" if query else path


def _chips(tags: Iterable[str], metadata: Mapping[str, Any], ns: str, matched: set[str]) -> str:
    parts = []
    for tag in tags:
        kind = "chip tag matched" if tag in matched else "chip tag"
        parts.append(f'<a class="{kind}" href="{_link("/", tags=tag, ns=ns)}">{escape(tag)}</a>')
    for key, value in metadata.items():
        parts.append(f'<span class="chip kv">{escape(key)}={escape(format_value(value))}</span>')
    return "".join(parts)


def _box(memory_id: str) -> str:
    """A memory's checkbox, for the bulk form of the page."""
    value = escape(memory_id)
    return (
        f'<input type="checkbox" name="ids" value="{value}" form="bulk-form" '
        f'aria-label="select {value}">'
    )


def memory_rows(memories: Sequence[Memory], ns: str, selectable: bool, *, back: str = "") -> Markup:
    """The browse page's rows: a checkbox (for bulk changes), the text, time, tags and
    metadata of each memory; each links to the memory's page, which leads ``back``."""
    out = []
    for m in memories:
        memory_id = escape(m.id)
        box = _box(m.id) if selectable else ""
        out.append(
            f'<li class="memory" data-id="{memory_id}">{box}<div class="body">'
            f'<a class="text" href="{_link("/memory", id=m.id, ns=ns, back=back)}">'
            f"{escape(m.text)}</a>"
            f'<div class="meta"><time>{format_time(m.created_at)}</time>'
            f"{_chips(m.tags, m.metadata, ns, set())}</div></div></li>"
        )
    return Markup("\n".join(out))


def _leg(hit: Hit, leg: str, label: str, score: str) -> str:
    if leg not in hit.ranks:
        return f'<td class="leg-{leg}">{label} —</td>'
    return f'<td class="leg-{leg}">{label} <b>#{hit.ranks[leg]}</b> {score}</td>'


def hit_rows(
    hits: Sequence[Hit],
    texts: Sequence[Markup],
    matched: Sequence[str],
    ns: str,
    *,
    selectable: bool = False,
    back: str = "",
) -> Markup:
    """The search page's rows: a checkbox (for bulk changes), position, relevance, the
    highlighted text, and *why*: each leg's rank and raw score, the matched tags, the
    fused score."""
    wanted = set(matched)
    out = []
    for position, (hit, text) in enumerate(zip(hits, texts, strict=True), start=1):
        found = [t for t in hit.tags if t in wanted]
        link = _link("/memory", id=hit.id, ns=ns, back=back)
        scores = hit.scores
        vector = f"cos {scores['vector']:.3f}" if "vector" in scores else ""
        keyword = f"BM25 {scores['keyword']:.2f}" if "keyword" in scores else ""
        tag = f"{int(scores.get('tag', 0))} matched" + (
            f": {escape(', '.join(found))}" if found else ""
        )
        out.append(
            f'<li class="hit" data-id="{escape(hit.id)}">{_box(hit.id) if selectable else ""}'
            f'<div class="score" title="relevance in [0, 1]"><span class="pos">#{position}</span>'
            f'<meter min="0" max="1" value="{hit.score:.3f}"></meter>'
            f'<span class="relevance">{hit.score:.2f}</span></div>'
            f'<div class="body"><a class="text" href="{link}">'
            f"{text}</a>"
            f'<div class="meta"><time>{format_time(hit.memory.created_at)}</time>'
            f"{_chips(hit.tags, hit.metadata, ns, wanted)}</div>"
            f'<table class="why" aria-label="why this memory came back"><tr><th>why</th>'
            f"{_leg(hit, 'vector', 'vector', vector)}{_leg(hit, 'keyword', 'keyword', keyword)}"
            f"{_leg(hit, 'tag', 'tag', tag)}"
            f'<td class="fused">fused {hit.fused_score:.4f}</td></tr></table></div></li>'
        )
    return Markup("\n".join(out))
