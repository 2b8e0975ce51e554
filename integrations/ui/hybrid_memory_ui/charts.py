"""Charts as inline SVG, drawn on the server: no chart library, nothing to download.
Pure: values in, markup out; every label is escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from markupsafe import Markup

_FONT = 'font-size="11" font-family="system-ui, sans-serif"'


def _nice_max(value: float) -> float:
    """A round axis end at or above ``value`` (1, 2, 4, 6, 8 or 10 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 4, 6, 8, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def column_chart(
    labels: Sequence[str], values: Sequence[int], *, title: str, width: int = 720, height: int = 220
) -> Markup:
    """Vertical bars, one per label (labels thinned to fit), with a y axis."""
    left, bottom, top = 44, 34, 12
    plot_w, plot_h = width - left - 8, height - bottom - top
    top_value = _nice_max(max(values, default=0))
    n = max(len(values), 1)
    slot = plot_w / n
    # A label every few bars, so that no two touch: about 6.5 px a character at 11 px.
    widest = max((len(label) for label in labels), default=0) * 6.5 + 10
    every = max(1, math.ceil(widest / slot))
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    # A middle line only where it falls on a whole count.
    fractions = (0.0, 0.5, 1.0) if top_value % 2 == 0 else (0.0, 1.0)
    for fraction in fractions:
        y = top + plot_h * (1 - fraction)
        parts.append(
            f'<line x1="{left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" {_FONT}>'
            f"{top_value * fraction:g}</text>"
        )
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        bar_h = plot_h * value / top_value
        x = left + i * slot
        parts.append(
            f'<rect class="bar" x="{x + slot * 0.1:.1f}" y="{top + plot_h - bar_h:.1f}" '
            f'width="{max(slot * 0.8, 1):.1f}" height="{bar_h:.1f}">'
            f"<title>{escape(label)}: {value}</title></rect>"
        )
        if i % every == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 16}" '
                f'text-anchor="middle" {_FONT}>{escape(label)}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def bar_chart(
    labels: Sequence[str],
    values: Sequence[int],
    *,
    title: str,
    width: int = 720,
    links: Sequence[str] | None = None,
) -> Markup:
    """Horizontal bars, one row per label, the value at the end of each; with ``links``
    (an address per label, on this site), each row is a link."""
    row, left = 22, 170
    height = row * max(len(values), 1) + 8
    top_value = max(max(values, default=0), 1)
    plot_w = width - left - 60
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = 4 + i * row
        bar_w = plot_w * value / top_value
        shown = label if len(label) <= 24 else label[:23] + "…"
        row_svg = (
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" {_FONT}>{escape(shown)}</text>'
            f'<rect class="bar" x="{left}" y="{y + 3}" width="{max(bar_w, 1):.1f}" '
            f'height="{row - 6}"><title>{escape(label)}: {value}</title></rect>'
            f'<text x="{left + bar_w + 6:.1f}" y="{y + 15}" {_FONT}>{value}</text>'
        )
        if links is not None:
            row_svg = f'<a href="{escape(links[i])}" class="row-link">{row_svg}</a>'
        parts.append(row_svg)
    parts.append("</svg>")
    return Markup("".join(parts))
