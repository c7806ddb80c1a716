"""The price-move rule (cannaspider/analytics/plausible.py) in Python and in SQL says the same of
the same moves, at and around its bounds (issue #28, 16)."""

from __future__ import annotations

from decimal import Decimal

from cannaspider.analytics.plausible import MAX_FACTOR, PRICE_FLOOR, price_move_plausible, price_move_plausible_sql

MOVES = [
    ("30.00", "28.00", True),
    ("30.00", "3.00", True),  # a 90 % clearance: ÷10 exactly
    ("30.00", "2.99", False),
    ("30.00", "0.01", False),  # a broken price, not a 99.97 % drop
    ("30.00", "0.00", False),
    ("0.05", "30.00", False),  # from a placeholder
    ("0.10", "1.00", True),  # the floor and ×10, both at their bound
    ("20.00", "200.00", True),
    ("20.00", "200.01", False),
    ("20.00", "20000.00", False),  # ×1000
    (None, "20.00", False),
    ("20.00", None, False),
]


def test_the_bounds_come_from_the_unit_price_ranges():
    assert PRICE_FLOOR == Decimal("0.1") and MAX_FACTOR == 10


def test_python_and_sql_agree(sql):
    condition = price_move_plausible_sql("old", "new")
    for old, new, expected in MOVES:
        as_decimal = (Decimal(old) if old else None, Decimal(new) if new else None)
        assert price_move_plausible(*as_decimal) is expected, (old, new)
        [(in_sql,)] = sql(
            f"SELECT coalesce({condition}, false) FROM (SELECT %s::numeric AS old, %s::numeric AS new) m", (old, new)
        )
        assert in_sql is expected, (old, new)
