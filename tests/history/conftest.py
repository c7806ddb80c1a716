"""A history of four months over three products (every kind of value a snapshot holds: nulls,
decimals, units, specials' JSON, statuses with quotes, commas and a newline, an empty one), and
the readers an analyst uses, to compare before and after a month moves."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any

import psycopg
import pytest

from cannaspider.web import dashboard_queries as q

MONTHS = (date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1), date(2026, 10, 1))
PRODUCTS = (("S1", "a" * 24), ("S1", "b" * 24), ("S2", "a" * 24))  # (store, provider product id)
STATUSES = ("Active", None, "", 'say "hi", then\nleave')
UNITS = ("p", "m", "g", None)


def seed_history(db: str) -> list[tuple[int, str]]:
    """Snapshots of PRODUCTS in MONTHS (7 a month each); returns (dispensary_id, provider_product_id)."""
    keys = []
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ensure_snapshot_partitions(%s, %s)", (MONTHS[0], len(MONTHS) + 2))
        stores: dict[str, int] = {}
        for n, (store, provider_id) in enumerate(PRODUCTS):
            if store not in stores:
                row = conn.execute("INSERT INTO dispensaries (name) VALUES (%s) RETURNING id", (store,)).fetchone()
                stores[store] = row[0]
            product = conn.execute(
                "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw) VALUES (%s, %s, 'P') "
                "RETURNING id",
                (stores[store], provider_id),
            ).fetchone()[0]
            keys.append((stores[store], provider_id))
            for m, month in enumerate(MONTHS):
                for i in range(7):
                    k = n * 100 + m * 10 + i
                    conn.execute(
                        "INSERT INTO product_snapshots (store_product_id, captured_at, crawl_run_id, "
                        "quantity_available, is_on_special, is_in_stock, thc_unit, cbd_unit, price_rec, price_med, "
                        "price_rec_special, price_med_special, thc_value, cbd_value, specials, status) VALUES "
                        "(%s, %s::timestamptz + %s * interval '3 days 1 hour 0.000123 seconds', %s, %s, %s, %s, "
                        "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (
                            product,
                            f"{month.isoformat()} 00:00:00+00",
                            i,
                            None if k % 5 == 0 else k,
                            None if k % 3 == 0 else k % 40,
                            k % 2 == 0,
                            k % 4 != 1,
                            UNITS[k % 4],
                            UNITS[(k + 1) % 4],
                            None if k % 7 == 3 else f"{10 + k % 30}.{k % 100:02d}",
                            None if k % 2 else f"{k}.05",
                            f"{k % 9}.99" if k % 2 == 0 else None,
                            None,
                            f"{k % 30}.125" if k % 6 else None,
                            "0.001" if k % 3 == 1 else None,
                            '[{"name": "Deal", "off": 0.2}]' if k % 2 == 0 else None,
                            STATUSES[k % 4],
                        ),
                    )
    return keys


def raw_rows(db: str) -> list[tuple[Any, ...]]:
    """Every snapshot as the view snapshot_history gives it, in one order."""
    with psycopg.connect(db) as conn:
        return conn.execute(
            "SELECT *, specials::text FROM snapshot_history ORDER BY store_product_id, captured_at"
        ).fetchall()


def api_history(db: str, keys: list[tuple[int, str]], limit: int = 2000) -> list[list[dict[str, Any]]]:
    """dashboard_queries.history of each product (GET …/history's snapshots)."""

    async def read() -> list[list[dict[str, Any]]]:
        async with await psycopg.AsyncConnection.connect(db) as conn:
            return [await q.history(conn, d, p, limit=limit) for d, p in keys]

    return asyncio.run(read())


@pytest.fixture
def store(tmp_path):
    return tmp_path / "cold"
