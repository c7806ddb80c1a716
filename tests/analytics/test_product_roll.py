"""The product roll in parts (cannaspider/analytics/product_roll.py, migrations/024_roll_parts.sql)
on the histories the other analytics tests script (test_refresh.py's and test_market.py's, in one
database): the same rows with one part as with two or three, first and incremental rolls; a roll
whose part fails leaves the mark where it was, and the next roll makes up for it exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from cannaspider.analytics import product_roll
from tests.analytics import test_market, test_refresh

ROLLED_TABLES = "analytics_product_daily, analytics_product_days, analytics_roll_state"
WORK_MEM = "64MB"
# what a roll leaves: every row of both rolled tables and the mark
LEFT = {
    "daily": "SELECT * FROM analytics_product_daily ORDER BY store_product_id, day",
    "days": "SELECT * FROM analytics_product_days ORDER BY store_product_id",
    "state": "SELECT rolled_upto, market_from FROM analytics_roll_state",
}
# a second batch: a same-day snapshot merging into its day, one stamped before the newest rolled
# snapshot (a write that committed late), a new day, a product's first snapshot (quantity -1 marks them)
LATER = """
INSERT INTO product_snapshots (store_product_id, captured_at, price_rec, is_on_special, quantity_available)
SELECT id, '2026-11-29 15:00Z'::timestamptz, price_rec + 1, true, -1
  FROM store_products WHERE provider_product_id IN ('pa1', 'p1')
UNION ALL SELECT id, '2026-11-29 07:30Z', 21.00, false, -1 FROM store_products WHERE provider_product_id = 'pb1'
UNION ALL SELECT id, '2026-11-30 06:00Z', price_rec, false, -1 FROM store_products WHERE provider_product_id <> 'p5'
UNION ALL SELECT id, '2026-11-30 07:00Z', 7.50, false, -1 FROM store_products WHERE provider_product_id = 'p5'
"""


def roll(db: str, parts: int) -> int:
    async def run() -> int:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return await product_roll.roll(conn, WORK_MEM, parts, db)

    return asyncio.run(run())


def left(db: str) -> dict[str, list[tuple]]:
    return {name: test_refresh.rows(db, query) for name, query in LEFT.items()}


def execute(db: str, query: str, params=None) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(query, params)


@pytest.fixture
def histories(db: str) -> str:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {ROLLED_TABLES}")
        test_refresh.script(conn)
        conn.execute("SELECT ensure_snapshot_partitions('2026-11-01', 2)")
        test_market.script(conn)
    return db


@pytest.fixture
def reference(histories: str) -> Iterator[dict[str, tuple[int, dict[str, list[tuple]]]]]:
    """What one part writes and leaves after the first batch, and after the second; then back to
    the first batch, nothing rolled."""
    first = roll(histories, 1), left(histories)
    execute(histories, LATER)
    second = roll(histories, 1), left(histories)
    execute(histories, "DELETE FROM product_snapshots WHERE quantity_available = -1")
    execute(histories, f"TRUNCATE {ROLLED_TABLES}")
    yield {"first": first, "second": second}


@pytest.mark.parametrize("parts", [2, 3])
def test_the_parts_roll_what_one_part_rolls(histories, reference, parts):
    (written, first), (more, second) = reference["first"], reference["second"]
    # both histories were rolled, the later batch merged into days already rolled
    assert len(first["days"]) == 8 and first["state"][0][1] is not None
    assert more < len(second["daily"]) - len(first["daily"]) + len(second["days"])
    assert roll(histories, parts) == written
    assert left(histories) == first
    execute(histories, LATER)
    assert roll(histories, parts) == more
    assert left(histories) == second
    assert roll(histories, parts) == 0  # nothing new: nothing written, the mark stands
    assert left(histories) == second


# a part that fails: the trigger refuses its products' rows (store_product_id % 2 = parity)
FAIL = """
CREATE FUNCTION roll_part_fails() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'part killed'; END $$;
CREATE TRIGGER roll_part_fails BEFORE INSERT ON analytics_product_days
   FOR EACH ROW WHEN (NEW.store_product_id % 2 = {parity}) EXECUTE FUNCTION roll_part_fails();
"""
MEND = "DROP TRIGGER IF EXISTS roll_part_fails ON analytics_product_days; DROP FUNCTION IF EXISTS roll_part_fails()"


@pytest.fixture
def failing(histories: str) -> Iterator[None]:
    try:
        yield
    finally:
        execute(histories, MEND)


def test_a_failed_part_leaves_the_mark_and_the_next_roll_makes_up_for_it(histories, reference, failing):
    roll(histories, 1)
    execute(histories, LATER)
    mark = left(histories)["state"]
    execute(histories, FAIL.format(parity=0))
    # part 0 fails: part 1 may commit first or be cancelled; the mark must not move either way
    with pytest.raises(ExceptionGroup) as failed:
        roll(histories, 2)
    assert [str(e).splitlines()[0] for e in failed.value.exceptions] == ["part killed"]
    assert left(histories)["state"][0][0] == mark[0][0]
    execute(histories, MEND)
    assert roll(histories, 2) > 0
    got, want = left(histories), reference["second"][1]
    assert (got["daily"], got["days"]) == (want["daily"], want["days"])
    # if part 1 committed, its newest snapshot is not the mark's: the next roll reads from a
    # little earlier (what it reads again, each product's own mark skips)
    (upto, market_from), ((want_upto, want_from),) = got["state"][0], want["state"]
    assert market_from == want_from and mark[0][0] < upto <= want_upto


def test_an_incremental_roll_cut_short_counts_each_snapshot_once(histories, reference, failing):
    roll(histories, 2)
    execute(histories, LATER)
    execute(histories, FAIL.format(parity=1))
    with psycopg.connect(histories, autocommit=True) as conn:
        # by hand, so that it is certain that part 0 committed and part 1 did not
        scan_from = conn.execute("SELECT analytics_roll_begin()").fetchone()[0]
        assert scan_from is not None
        assert conn.execute("SELECT written FROM analytics_roll_product_part(%s, 0, 2)", (scan_from,)).fetchone()[0]
        with pytest.raises(psycopg.errors.RaiseException, match="part killed"):
            conn.execute("SELECT analytics_roll_product_part(%s, 1, 2)", (scan_from,))
    execute(histories, MEND)
    roll(histories, 2)  # reads part 0's new snapshots again: each product's own mark skips them
    assert left(histories) == reference["second"][1]


def test_a_rebuild_cut_short_is_a_rebuild_again(histories, reference, failing):
    written, first = reference["first"]
    # a mark, but the tables emptied (as an operator would to rebuild them)
    execute(histories, "INSERT INTO analytics_roll_state (rolled_at, rolled_upto) VALUES (now(), '2026-11-29Z')")
    execute(histories, FAIL.format(parity=1))
    with psycopg.connect(histories, autocommit=True) as conn:
        assert conn.execute("SELECT analytics_roll_begin()").fetchone() == (None,)  # a rebuild: the mark cleared
        assert 0 < conn.execute("SELECT written FROM analytics_roll_product_part(NULL, 0, 2)").fetchone()[0] < written
        with pytest.raises(psycopg.errors.RaiseException, match="part killed"):
            conn.execute("SELECT analytics_roll_product_part(NULL, 1, 2)")
        # no mark, so the next roll rebuilds; the market roll rewrites what the committed part wrote
        assert conn.execute("SELECT rolled_upto, market_from FROM analytics_roll_state").fetchone() == (
            None,
            first["state"][0][1],
        )
    execute(histories, MEND)
    assert roll(histories, 2) == written
    assert left(histories) == first


def test_a_part_out_of_range_is_refused(histories):
    with psycopg.connect(histories, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="part 2 of 2 parts"):
            conn.execute("SELECT analytics_roll_product_part(NULL, 2, 2)")
    with pytest.raises(ValueError, match="at least one part"):
        roll(histories, 0)
