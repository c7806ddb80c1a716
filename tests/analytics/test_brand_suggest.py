"""`scrapy brands suggest` and `scrapy brands rename` (docs/analytics.md, "Near-duplicate brands"),
run as the real command over a seeded market (tests/web/analyst_market.py): the likely duplicates
ranked with their reasons (fuzzy names, one Dutchie brandId, stores listing both), and a brand shown
by the name an operator gives it, found by it, its spellings kept."""

from __future__ import annotations

import os

import psycopg
import pytest

from cannaspider.analytics import brand_suggest
from tests.helpers import run_scrapy
from tests.web.analyst_market import seed

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@pytest.fixture
def market(db):
    with psycopg.connect(db, autocommit=True) as conn:
        return seed(conn)


@pytest.fixture
def env(db, tmp_path):
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")},
        "DATABASE_URL": db,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_FEED_DIR": str(tmp_path / "feeds"),
    }


def test_suggest_ranks_the_near_duplicate_with_its_reasons(market, env, sql, db):
    result = run_scrapy("brands", "suggest", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # Mohave Cannabis Co. (store a) and MOHAVE CANABIS (store b): names alike, no store lists both
    assert lines[0].startswith("  1. score ") and "Mohave Cannabis Co." in lines[0] and "MOHAVE CANABIS" in lines[0]
    assert "names 97/100 alike: 'mohave cannabis' / 'mohave canabis'" in lines[1]
    assert "no store lists both (of 1 and 1)" in lines[2]
    assert lines[3].strip() == f'merge: scrapy brands alias "MOHAVE CANABIS" {market["mohave"]}'
    assert "Café Nuit" not in result.stdout  # nothing like it
    # the same Dutchie brandId sent with both names, and a store that lists both: they rank higher
    sql("UPDATE store_products SET brand_name_raw = 'Mohave Canabis' WHERE provider_product_id = 'a5'")
    sql(
        "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, canonical_brand_id, brand_ref_id) "
        "VALUES (%s, 'a9', 'Product a9', %s, %s)",
        (market["a"], market["mohave2"], market["mohave2"]),
    )
    with psycopg.connect(db) as conn:
        (top,) = brand_suggest.suggest(conn)
    assert top.brand_ids == ["mo1"] and top.shared_stores == 1
    assert top.score == pytest.approx(top.name_score + 15 + 10 * 1 / 2)
    again = run_scrapy("brands", "suggest", env=env).stdout
    assert "Dutchie brandId mo1 is sent with both names" in again
    assert "listed together by 1 store(s) (of 2 and 1; Jaccard 0.50)" in again
    # after the alias it suggests, nothing is left to suggest
    assert run_scrapy("brands", "alias", "MOHAVE CANABIS", str(market["mohave"]), env=env).returncode == 0
    assert run_scrapy("brands", "suggest", env=env).stdout.startswith("no likely duplicate")


def test_rename_shows_the_brand_by_its_new_name_and_keeps_its_spellings(market, env, sql):
    result = run_scrapy("brands", "rename", "cafe nuit", "Café Nuit Farms", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"brand {market['cafe']} is shown as 'Café Nuit Farms' (was 'Café Nuit'); a search by it finds the brand"
    )
    assert sql("SELECT display_name, name FROM brands WHERE id = %s", (market["cafe"],)) == [
        ("Café Nuit Farms", "Café Nuit")
    ]
    assert sql("SELECT brand_id FROM brand_aliases WHERE alias = 'cafe nuit farms'") == [(market["cafe"],)]
    listing = run_scrapy("brands", "list", env=env).stdout
    assert "Café Nuit Farms  [" in listing and "also: Café Nuit" in listing
    # another brand's name is refused, saying how to merge instead
    refused = run_scrapy("brands", "rename", str(market["cafe"]), "Abundant Organics", env=env)
    assert refused.returncode == 2 and refused.stderr.startswith("error: 'Abundant Organics' is the name of brand")
    for args in (("rename", "cafe nuit", "!!!"), ("rename", "no such brand", "X"), ("suggest", "--min-score", "101")):
        bad = run_scrapy("brands", *args, env=env)
        assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr, args
