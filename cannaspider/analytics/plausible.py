"""Which prices and price moves are plausible enough to enter the market's figures (issue #28, 16).

A price that is wrong ($0, a placeholder, a misplaced decimal point) is no figure to compare. Unit
prices are bounded where they are computed (`PLAUSIBLE` per basis, in the identity module: outside,
the unit price is left out and counted). A price *move* is bounded here, in one place, for every
reader of the product events that reports moves (the market roll's drops, rises and movers:
analytics/market.py; the price-drop alerts: alerts/match.py):

- both prices at least `PRICE_FLOOR`, the lowest plausible unit price of any basis: no listing
  costs less than one unit at its cheapest, so $30 → $0.01 is a broken price, not a drop;
- the new price within `MAX_FACTOR` of the old one either way: a store reprices an item by tens
  of percent, a clearance by up to 90 %; a ×10 or ÷10 jump in one crawl is a misplaced decimal
  point or a size read as a price (× 1000), not a market move.

An implausible move stays a `price_changed` event (the menu did send it) but is counted apart
(market_state_daily.price_changes_implausible) instead of as a drop or a rise, is never a mover and
never fires a price alert. docs/analytics.md, "Implausible prices", argues the bounds.
"""

from __future__ import annotations

from decimal import Decimal

from cannaspider.identity import PLAUSIBLE

PRICE_FLOOR = Decimal(str(min(low for low, _ in PLAUSIBLE.values())))  # $0.10 (the 'unit' basis)
MAX_FACTOR = 10  # a move beyond ×10 or ÷10 in one step is a wrong price


def price_move_plausible(old: Decimal | None, new: Decimal | None) -> bool:
    """Whether a move from `old` to `new` is a price move to report (both known, see the module)."""
    if old is None or new is None or old < PRICE_FLOOR or new < PRICE_FLOOR:
        return False
    return new <= old * MAX_FACTOR and new * MAX_FACTOR >= old


def price_move_plausible_sql(old: str, new: str) -> str:
    """price_move_plausible() as an SQL condition over the columns `old` and `new` (constant names
    from our own statements, never input): false when either is NULL."""
    return (
        f"({old} >= {PRICE_FLOOR} AND {new} >= {PRICE_FLOOR}"
        f" AND {new} <= {old} * {MAX_FACTOR} AND {new} * {MAX_FACTOR} >= {old})"
    )
