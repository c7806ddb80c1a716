"""cannaspider/web/chart.py: the product chart is scaled by time, breaks its line where nothing
was seen, draws the special only where there was one, bands the out-of-stock intervals and marks
the events; read back from the SVG it returns."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta

from cannaspider.web.chart import line_chart, price_chart

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
NS = ""


def snap(hours: float, price: float, special: float | None = None, in_stock: bool = True) -> dict:
    return {
        "captured_at": T0 + timedelta(hours=hours),
        "price_rec": price,
        "price_rec_special": special,
        "is_on_special": special is not None,
        "is_in_stock": in_stock,
    }


def svg(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))


def xs(root: ET.Element, tag: str, css: str) -> list[float]:
    return [float(e.get("cx") or e.get("x") or 0) for e in root.iter(tag) if css in (e.get("class") or "").split()]


def polylines(root: ET.Element, css: str) -> list[list[tuple[float, float]]]:
    lines = []
    for e in root.iter("polyline"):
        if e.get("class") == css:
            lines.append([tuple(map(float, p.split(","))) for p in (e.get("points") or "").split()])
    return lines


def test_points_are_placed_by_time_not_by_crawl_number():
    # crawls at 0 h, 4 h, 8 h, then 10 h: the last gap is half the others
    root = svg(price_chart([snap(0, 10), snap(4, 11), snap(8, 12), snap(10, 12)]))
    a, b, c, d = xs(root, "circle", "pt")
    assert abs((b - a) - (c - b)) < 0.2 and abs((d - c) - (c - b) / 2) < 0.2
    ticks = [t.text for t in root.iter("text") if "x" in (t.get("class") or "").split()]
    assert ticks and all(re.fullmatch(r"\d\d:\d\d|[A-Z][a-z]{2} \d\d", t or "") for t in ticks)
    assert len([t for t in root.iter("text") if "y" in (t.get("class") or "").split()]) >= 3  # price ticks


def test_the_line_breaks_where_nothing_was_seen_and_the_special_only_where_there_was_one():
    snaps = [snap(0, 10), snap(4, 10, 8), snap(8, 10, 8), snap(12, 10), snap(40, 11), snap(44, 11, 9)]
    root = svg(price_chart(snaps))
    price = polylines(root, "price")
    assert [len(run) for run in price] == [4, 2]  # broken over the 28 h unseen
    special = polylines(root, "special")
    assert len(special) == 2 and len(special[0]) == 2  # the crawls at 4 h and 8 h; the lone one at 44 h
    first_special_x = {round(x) for x, _ in special[0]}
    pts = xs(root, "circle", "pt")
    assert first_special_x == {round(pts[1]), round(pts[2])}


def test_out_of_stock_bands_and_event_marks():
    snaps = [snap(0, 10), snap(4, 10), snap(20, 9)]
    events = [
        {"occurred_at": T0 + timedelta(hours=8), "type": "out_of_stock", "price_rec_old": None, "price_rec": 10.0},
        {"occurred_at": T0 + timedelta(hours=20), "type": "back_in_stock", "price_rec_old": None, "price_rec": 9.0},
        {"occurred_at": T0 + timedelta(hours=20), "type": "price_changed", "price_rec_old": 10.0, "price_rec": 9.0},
    ]
    intervals = [{"from": T0 + timedelta(hours=8), "until": T0 + timedelta(hours=20)}]
    root = svg(price_chart(snaps, events, intervals))
    (band,) = [r for r in root.iter("rect") if r.get("class") == "oos"]
    left, width = float(band.get("x") or 0), float(band.get("width") or 0)
    p0, p4, p20 = xs(root, "circle", "pt")
    per_hour = (p20 - p0) / 20
    assert abs(left - (p0 + 8 * per_hour)) < 0.2 and abs(left + width - p20) < 0.2
    marks = [g for g in root.iter("g") if "event" in (g.get("class") or "").split()]
    assert [g.get("data-type") for g in marks] == ["out_of_stock", "back_in_stock", "price_changed"]
    assert "$10.00 → $9.00" in (marks[2].find("title").text or "")  # type: ignore[union-attr]
    assert len(polylines(root, "price")) == 2  # broken across the out-of-stock interval


def test_an_open_interval_reaches_the_right_edge():
    now = T0 + timedelta(hours=30)
    events = [{"occurred_at": T0 + timedelta(hours=12), "type": "out_of_stock", "price_rec_old": None, "price_rec": 5}]
    root = svg(
        price_chart([snap(0, 5), snap(4, 5)], events, [{"from": events[0]["occurred_at"], "until": None}], now=now)
    )
    (band,) = [r for r in root.iter("rect") if r.get("class") == "oos"]
    assert abs(float(band.get("x") or 0) + float(band.get("width") or 0) - (640 - 14)) < 0.2
    assert "still" in (band.find("title").text or "")  # type: ignore[union-attr]


def test_no_snapshot_is_a_sentence_and_the_market_lines_have_one_dot_per_day():
    assert "No snapshot" in price_chart([])
    root = svg(
        line_chart(
            {"Flower": [(date(2026, 11, 1), 8.0), (date(2026, 11, 2), 9.0)], "Vape": [(date(2026, 11, 2), 20.0)]}
        )
    )
    series = {g.get("data-series"): len(list(g.iter("circle"))) for g in root.iter("g")}
    assert series == {"Flower": 2, "Vape": 1}


def test_the_market_legend_is_drawn_in_each_series_colour():
    root = svg(
        line_chart({name: [(date(2026, 11, 1), 8.0 + k)] for k, name in enumerate(("Flower", "Vape", "Edible"))})
    )
    colours = []
    for group in (g for g in root.iter("g") if g.get("data-series")):
        colour = (group.get("style") or "").split("stroke:")[1].split(";")[0]
        (text,) = [t for t in group.iter("text") if t.get("class") == "legend"]
        (swatch,) = [r for r in group.iter("rect") if r.get("class") == "swatch"]
        assert f"fill:{colour}" in (text.get("style") or "") and f"fill:{colour}" in (swatch.get("style") or "")
        colours.append(colour)
    assert len(set(colours)) == 3
