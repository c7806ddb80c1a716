"""Charts as inline SVG, drawn on the server: no script, no chart library, nothing fetched; they
scale to the phone's width (viewBox).

price_chart: a product's price over time (docs/dashboard.md). The x axis is time, not crawl
number: points sit where their snapshot was taken, with time ticks. The price line breaks where
nothing was seen (a gap over GAP_FACTOR times the usual spacing between snapshots, or an
out-of-stock interval between two), the special price is drawn only over snapshots that were on
special, each out-of-stock interval is a red band over the plot (to the right edge while it is
open), and each event is a mark at its time (`g.event`, titled). Under the plot one stock cell
per snapshot (green in stock, red out of stock).

line_chart: a few named series over days (the market page's price per gram by category).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from statistics import median
from typing import Any

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 250
LEFT, RIGHT, TOP = 52, 14, 22
PLOT_BOTTOM = 186  # price area; the stock band sits below it
BAND_TOP, BAND_HEIGHT = 192, 12
GAP_FACTOR = 2.5  # a spacing this many times the median one is a gap: the line breaks
TIME_STEPS = (  # the tick spacing: the first that gives at most MAX_TICKS ticks
    timedelta(hours=1),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(hours=12),
    timedelta(days=1),
    timedelta(days=2),
    timedelta(days=7),
    timedelta(days=14),
    timedelta(days=30),
    timedelta(days=91),
    timedelta(days=365),
)
MAX_TICKS = 6
EVENT_LABELS = {
    "listed": "listed",
    "price_changed": "price changed",
    "special_started": "special started",
    "special_ended": "special ended",
    "out_of_stock": "out of stock",
    "back_in_stock": "back in stock",
}
SERIES_COLOURS = ("#2c5f8a", "#9a6700", "#1a7f37", "#c62828", "#6f42c1", "#0a7d8c", "#b35900", "#555")


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _nice_step(span: float, ticks: int = 4) -> float:
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _price_ticks(low: float, high: float) -> tuple[float, float, list[float]]:
    """A rounded range that holds [low, high] and the tick values in it."""
    if high - low < 0.01:
        low, high = max(0.0, low - 1), high + 1
    step = _nice_step(high - low)
    lo, hi = math.floor(low / step) * step, math.ceil(high / step) * step
    return lo, hi, [lo + i * step for i in range(round((hi - lo) / step) + 1)]


def _time_ticks(t0: datetime, t1: datetime) -> list[datetime]:
    span = t1 - t0
    step = next((s for s in TIME_STEPS if span / s <= MAX_TICKS), TIME_STEPS[-1])
    if step >= timedelta(days=1):  # ticks on UTC midnights
        first = datetime(t0.year, t0.month, t0.day, tzinfo=UTC)
    else:
        hours = int(step.total_seconds() // 3600)
        first = datetime(t0.year, t0.month, t0.day, t0.hour - t0.hour % hours, tzinfo=UTC)
    ticks, at = [], first
    while at <= t1:
        if at >= t0:
            ticks.append(at)
        at += step
    return ticks


def _tick_label(at: datetime, span: timedelta) -> str:
    """Days over a long span and at midnight, else hours (UTC)."""
    return at.strftime("%b %d") if span > timedelta(days=2) or at.hour == 0 else at.strftime("%H:%M")


def price_chart(
    snapshots: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
    oos_intervals: Sequence[Mapping[str, Any]] = (),
    *,
    now: datetime | None = None,
) -> Markup:
    n = len(snapshots)
    if n == 0:
        return Markup('<p class="muted">No snapshot yet.</p>')
    times = [_utc(s["captured_at"]) for s in snapshots]
    intervals = [
        (_utc(i["from"]) if i["from"] else None, _utc(i["until"]) if i["until"] else None) for i in oos_intervals
    ]
    event_times = [_utc(e["occurred_at"]) for e in events]
    t0 = min([times[0], *event_times, *(f for f, _ in intervals if f)])
    t1 = max([times[-1], *event_times, *(u for _, u in intervals if u)])
    if any(u is None for _, u in intervals):  # open: out of stock until now
        t1 = max(t1, _utc(now or datetime.now(UTC)))
    if t1 - t0 < timedelta(hours=1):
        t0, t1 = t0 - timedelta(minutes=30), t1 + timedelta(minutes=30)
    span = (t1 - t0).total_seconds()

    def x(at: datetime) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (at - t0).total_seconds() / span

    prices = [s["price_rec"] for s in snapshots]
    specials = [s["price_rec_special"] if s["is_on_special"] else None for s in snapshots]
    known = [p for p in prices + specials if p is not None]
    low, high, yticks = _price_ticks(min(known), max(known)) if known else (0.0, 1.0, [0.0, 1.0])

    def y(price: float | None) -> float:
        if price is None:
            return PLOT_BOTTOM
        return PLOT_BOTTOM - (price - low) / (high - low) * (PLOT_BOTTOM - TOP)

    spacings = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    usual = median(spacings) if spacings else 0.0

    def broken(i: int) -> bool:
        """Whether the line breaks between snapshot i-1 and i."""
        if usual and spacings[i - 1] > GAP_FACTOR * usual:
            return True
        return any(f is not None and times[i - 1] < f <= times[i] for f, _ in intervals)

    def segments(values: Sequence[float | None]) -> list[list[int]]:
        runs: list[list[int]] = []
        for i, value in enumerate(values):
            if value is None:
                runs.append([])
                continue
            if not runs or not runs[-1] or broken(i):
                runs.append([])
            runs[-1].append(i)
        return [r for r in runs if r]

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" preserveAspectRatio="xMidYMid meet" '
        f'aria-label="price and stock over {n} crawls, {len(events)} events">'
    ]
    for f, u in intervals:  # under everything else
        left, right = x(f or t0), x(u or t1)
        label = f"out of stock {f:%b %d %H:%M} UTC" if f else "out of stock"
        label += f" until {u:%b %d %H:%M} UTC" if u else ", still"
        parts.append(
            f'<rect class="oos" x="{left:.1f}" y="{TOP}" width="{max(right - left, 2):.1f}" '
            f'height="{PLOT_BOTTOM - TOP}"><title>{escape(label)}</title></rect>'
        )
    for value in yticks:
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - RIGHT}" y2="{y(value):.1f}"/>')
        parts.append(
            f'<text class="tick y" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">${value:,.2f}</text>'
        )
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{PLOT_BOTTOM}" x2="{WIDTH - RIGHT}" y2="{PLOT_BOTTOM}"/>')
    # the time ticks' zone, left of the first (every time here is UTC)
    parts.append(f'<text class="tick zone" x="{LEFT - 6}" y="{HEIGHT - 8}" text-anchor="end">UTC</text>')
    for at in _time_ticks(t0, t1):
        parts.append(
            f'<line class="axis" x1="{x(at):.1f}" y1="{BAND_TOP + BAND_HEIGHT}" x2="{x(at):.1f}" '
            f'y2="{BAND_TOP + BAND_HEIGHT + 4}"/>'
        )
        parts.append(
            f'<text class="tick x" x="{x(at):.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
            f"{escape(_tick_label(at, t1 - t0))}</text>"
        )
    for css, values in (("price", prices), ("special", specials)):
        for run in segments(values):
            points = " ".join(f"{x(times[i]):.1f},{y(values[i]):.1f}" for i in run)
            if len(run) == 1:  # a lone snapshot: a short stroke, so it shows
                cx, cy = x(times[run[0]]), y(values[run[0]])
                points = f"{cx - 3:.1f},{cy:.1f} {cx + 3:.1f},{cy:.1f}"
            parts.append(f'<polyline class="{css}" points="{points}"/>')
    for i, snap in enumerate(snapshots):
        price = "no price" if snap["price_rec"] is None else f"${snap['price_rec']:.2f}"
        special = f", special ${snap['price_rec_special']:.2f}" if specials[i] is not None else ""
        stock = "in stock" if snap["is_in_stock"] else "out of stock"
        title = escape(f"{times[i]:%Y-%m-%d %H:%M} UTC: {price}{special}, {stock}")
        parts.append(
            f'<circle class="pt" cx="{x(times[i]):.1f}" cy="{y(snap["price_rec"]):.1f}" r="3">'
            f"<title>{title}</title></circle>"
        )
        half = min([*(s / span * (WIDTH - LEFT - RIGHT) / 2 for s in spacings[max(i - 1, 0) : i + 1]), 6.0])
        parts.append(
            f'<rect class="stock {"in" if snap["is_in_stock"] else "out"}" x="{x(times[i]) - half:.1f}" '
            f'y="{BAND_TOP}" width="{max(2 * half - 0.5, 1):.1f}" height="{BAND_HEIGHT}"><title>{title}</title></rect>'
        )
    for event, at in zip(events, event_times, strict=True):
        label = EVENT_LABELS.get(event["type"], event["type"])
        if event["type"] == "price_changed" and event.get("price_rec_old") is not None:
            label += f" ${event['price_rec_old']:.2f} → ${event['price_rec']:.2f}"
        title = escape(f"{at:%Y-%m-%d %H:%M} UTC: {label}")
        ex = x(at)
        parts.append(
            f'<g class="event {escape(event["type"])}" data-type="{escape(event["type"])}"><title>{title}</title>'
            f'<line x1="{ex:.1f}" y1="{TOP - 2}" x2="{ex:.1f}" y2="{PLOT_BOTTOM}"/>'
            f'<path d="M{ex - 4:.1f},{TOP - 10} L{ex + 4:.1f},{TOP - 10} L{ex:.1f},{TOP - 3} Z"/></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(series: Mapping[str, Sequence[tuple[date, float]]], *, unit: str = "$") -> Markup:
    """Named series of (day, value), one line each with a dot per day, a legend and ticks."""
    points = [p for values in series.values() for p in values]
    if not points:
        return Markup('<p class="muted">No data yet.</p>')
    d0, d1 = min(p[0] for p in points), max(p[0] for p in points)
    if d0 == d1:
        d0, d1 = d0 - timedelta(days=1), d1 + timedelta(days=1)
    days = (d1 - d0).days
    low, high, yticks = _price_ticks(min(p[1] for p in points), max(p[1] for p in points))
    right = WIDTH - 130  # the legend's room

    def x(day: date) -> float:
        return LEFT + (right - LEFT) * (day - d0).days / days

    def y(value: float) -> float:
        return PLOT_BOTTOM - (value - low) / (high - low) * (PLOT_BOTTOM - TOP)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" preserveAspectRatio="xMidYMid meet" '
        f'aria-label="{len(series)} series over {days + 1} days">'
    ]
    for value in yticks:
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y(value):.1f}" x2="{right}" y2="{y(value):.1f}"/>')
        parts.append(
            f'<text class="tick y" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{unit}{value:,.2f}</text>'
        )
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{PLOT_BOTTOM}" x2="{right}" y2="{PLOT_BOTTOM}"/>')
    t0, t1 = (datetime(d.year, d.month, d.day, tzinfo=UTC) for d in (d0, d1))
    for at in _time_ticks(t0, t1):
        parts.append(
            f'<text class="tick x" x="{x(at.date()):.1f}" y="{PLOT_BOTTOM + 16}" text-anchor="middle">{at:%b %d}</text>'
        )
    for k, (name, values) in enumerate(series.items()):
        colour = SERIES_COLOURS[k % len(SERIES_COLOURS)]
        line = " ".join(f"{x(d):.1f},{y(v):.1f}" for d, v in values)
        parts.append(f'<g class="series" data-series="{escape(name)}" style="stroke:{colour};fill:{colour}">')
        parts.append(f'<polyline class="line" points="{line}" style="fill:none;stroke-width:2"/>')
        for d, v in values:
            parts.append(
                f'<circle cx="{x(d):.1f}" cy="{y(v):.1f}" r="2.5"><title>{escape(name)} {d}: '
                f"{unit}{v:,.2f}</title></circle>"
            )
        # the legend in the series' colour: a swatch of its line and the name written in it (the
        # class's fill, the page's text colour, would otherwise win over the group's)
        ly = TOP + 14 * k
        parts.append(
            f'<rect class="swatch" x="{right + 8}" y="{ly - 2}" width="12" height="4" '
            f'style="stroke:none;fill:{colour}"/>'
            f'<text class="legend" x="{right + 24}" y="{ly + 4}" style="stroke:none;fill:{colour}">'
            f"{escape(name)}</text></g>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))
