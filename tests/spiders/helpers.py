"""Seeding the test database with sandbox stores without running discovery each time."""

from __future__ import annotations

import psycopg


def add_store(db_url: str, store: dict, *, resolved: bool = True, menu_url: str | None = None) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO dispensaries (name, slug, menu_url, state, city, platform_dispensary_id) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (
                store["name"],
                store["cName"],
                store["menu_url"] if menu_url is None else menu_url,
                store["state"],
                store["city"],
                store["id"] if resolved else None,
            ),
        ).fetchone()[0]


def products_of(db_url: str, dispensary_id: int) -> dict[str, tuple]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT provider_product_id, consecutive_misses, stock_status, is_in_stock FROM store_products "
            "WHERE dispensary_id = %s",
            (dispensary_id,),
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def runs_of(db_url: str, dispensary_id: int) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT status, error, products_seen, products_new, products_missed, products_marked_oos, pages_fetched "
            "FROM crawl_runs WHERE dispensary_id = %s ORDER BY id",
            (dispensary_id,),
        ).fetchall()
