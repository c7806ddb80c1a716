"""Dutchie option strings → sizes (cannaspider/platforms/dutchie/options.py); the options of whole products
are in test_normalizer.py."""

from __future__ import annotations

import pytest

from cannaspider.platforms.dutchie.options import parse_option_size


@pytest.mark.parametrize(
    "option, expected",
    [
        ("1/8oz", (3.5, "g")),
        ("1oz", (28.0, "g")),
        ("1/2oz", (14.0, "g")),
        ("1gC", (1.0, "g")),
        (".5g", (0.5, "g")),
        ("3.5g", (3.5, "g")),
        ("100mg", (100.0, "mg")),
        ("10pk", (10.0, "each")),
        ("N/A", (None, None)),
        ("each", (None, None)),
        ("", (None, None)),
        # pounds, avoirdupois (453.592 g), written every way menus write them
        ("1lb", (453.59, "g")),
        ("1 lb", (453.59, "g")),
        ("1 LB", (453.59, "g")),
        ("1/2 lb", (226.8, "g")),
        ("1/2lb", (226.8, "g")),
        (".5lb", (226.8, "g")),
        ("2 lbs", (907.18, "g")),
        ("1/4lb", (113.4, "g")),
        ("453g", (453.0, "g")),
        ("1" * 400 + "g", (None, None)),  # no size is that big, and numeric(12, 3) could not hold it
        ("99999999999oz", (None, None)),
        ("9999999999lb", (None, None)),
        ("lb", (None, None)),
    ],
)
def test_option_sizes(option, expected):
    assert parse_option_size(option) == expected
