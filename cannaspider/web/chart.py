"""A product's price and stock history as an inline SVG, drawn on the server: no script, no
chart library, nothing fetched; it scales to the phone's width (viewBox).

One point (`circle.pt`) per snapshot on the price line, the special price dashed when there is
one, and under it one stock cell per snapshot (green in stock, red out of stock)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP = 48, 12, 12
PLOT_BOTTOM = 180  # price area; the stock band sits below it
BAND_TOP, BAND_HEIGHT = 196, 16


def _x(i: int, n: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span / 2 if n == 1 else span * i / (n - 1))


def price_chart(snapshots: Sequence[dict[str, Any]]) -> Markup:
    n = len(snapshots)
    if n == 0:
        return Markup('<p class="muted">No snapshot yet.</p>')
    prices = [s["price_rec"] for s in snapshots]
    specials = [s["price_rec_special"] for s in snapshots]
    known = [p for p in prices + specials if p is not None]
    low, high = (min(known), max(known)) if known else (0.0, 1.0)
    if high - low < 0.01:
        low, high = max(0.0, low - 1), high + 1

    def y(price: float | None) -> float:
        if price is None:
            return PLOT_BOTTOM
        return PLOT_BOTTOM - (price - low) / (high - low) * (PLOT_BOTTOM - TOP)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" preserveAspectRatio="xMidYMid meet" '
        f'aria-label="price and stock over {n} crawls">',
        f'<line class="axis" x1="{LEFT}" y1="{PLOT_BOTTOM}" x2="{WIDTH - RIGHT}" y2="{PLOT_BOTTOM}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">${high:.2f}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{PLOT_BOTTOM}" text-anchor="end">${low:.2f}</text>',
    ]
    line = " ".join(f"{_x(i, n):.1f},{y(p):.1f}" for i, p in enumerate(prices) if p is not None)
    if line:
        parts.append(f'<polyline class="price" points="{line}"/>')
    special_line = " ".join(f"{_x(i, n):.1f},{y(p):.1f}" for i, p in enumerate(specials) if p is not None)
    if special_line:
        parts.append(f'<polyline class="special" points="{special_line}"/>')
    cell = (WIDTH - LEFT - RIGHT) / n
    for i, snap in enumerate(snapshots):
        at = snap["captured_at"]
        when = at.strftime("%Y-%m-%d %H:%M") if isinstance(at, datetime) else str(at)
        price = "no price" if snap["price_rec"] is None else f"${snap['price_rec']:.2f}"
        stock = "in stock" if snap["is_in_stock"] else "out of stock"
        title = escape(f"{when}: {price}, {stock}")
        parts.append(
            f'<circle class="pt" cx="{_x(i, n):.1f}" cy="{y(snap["price_rec"]):.1f}" r="3.5">'
            f"<title>{title}</title></circle>"
        )
        parts.append(
            f'<rect class="stock {"in" if snap["is_in_stock"] else "out"}" x="{LEFT + i * cell:.1f}" '
            f'y="{BAND_TOP}" width="{max(cell - 1, 1):.1f}" height="{BAND_HEIGHT}"><title>{title}</title></rect>'
        )
    first, last = snapshots[0]["captured_at"], snapshots[-1]["captured_at"]
    for x, at, anchor in ((LEFT, first, "start"), (WIDTH - RIGHT, last, "end")):
        label = at.strftime("%b %d %H:%M") if isinstance(at, datetime) else str(at)
        parts.append(f'<text class="tick" x="{x}" y="{HEIGHT - 6}" text-anchor="{anchor}">{escape(label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
