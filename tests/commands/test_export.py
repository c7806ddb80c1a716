"""`scrapy export events|snapshots|products|market`: files read back with json, csv and pyarrow,
their rows checked against SQL; bad input and an unwritable folder are one `error:` line and exit
2, leaving no file."""

from __future__ import annotations

import csv
import json
import os

import psycopg
import pyarrow.parquet as pq
import pytest

from tests.helpers import run_scrapy, seed_events

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@pytest.fixture
def env(db, tmp_path) -> dict:
    return {**os.environ, "DATABASE_URL": db, "CANNASPIDER_DATA_DIR": str(tmp_path / "data")}


def export(env, *args):
    return run_scrapy("export", *args, env=env, timeout=120)


def test_events_to_jsonl_csv_and_parquet_read_back_alike(env, sql, tmp_path):
    seed_events(sql)
    rows = {}
    for ext in ("jsonl", "csv", "parquet"):
        out = tmp_path / f"events.{ext}"
        result = export(env, "events", "--since", "2026-11-29", "--state", "AZ", "-o", str(out))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"6 events written to {out}"
        if ext == "jsonl":
            rows[ext] = [json.loads(line) for line in out.read_text().splitlines()]
        elif ext == "csv":
            with open(out, newline="") as f:
                rows[ext] = list(csv.DictReader(f))
        else:
            rows[ext] = pq.read_table(out).to_pylist()
        assert not list(tmp_path.glob("*.partial"))
    assert (
        [r["type"] for r in rows["parquet"]]
        == [r["type"] for r in rows["csv"]]
        == [r["type"] for r in rows["jsonl"]]
        == ["price_changed", "special_started", "out_of_stock", "special_ended", "back_in_stock", "price_changed"]
    )
    first_csv, first_pq, first_json = rows["csv"][0], rows["parquet"][0], rows["jsonl"][0]
    assert first_pq["price_rec_old"] == first_json["price_rec_old"] == float(first_csv["price_rec_old"]) == 20.0
    assert first_csv["price_med_old"] == "" and first_pq["price_med_old"] is None  # null: empty in CSV
    assert first_pq["occurred_at"].isoformat() == first_csv["occurred_at"] == "2026-11-29T10:00:00+00:00"
    schema = pq.read_schema(tmp_path / "events.parquet")
    assert str(schema.field("occurred_at").type) == "timestamp[us, tz=UTC]" and str(schema.field("id").type) == "int64"


def test_a_month_of_snapshots_to_parquet(env, sql, db, tmp_path):
    store = sql("INSERT INTO dispensaries (name) VALUES ('S') RETURNING id")[0][0]
    product = sql(
        "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw) VALUES (%s, %s, 'P') RETURNING id",
        (store, "p" * 24),
    )[0][0]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ensure_snapshot_partitions('2026-10-01', 3)")
        for at, price, special, status in (
            ("2026-10-31T23:59:59Z", 9, False, "Active"),
            ("2026-11-01T00:00:00Z", 10, True, "Active"),
            ("2026-11-30T23:00:00Z", 11, False, None),
            ("2026-12-01T00:00:00Z", 12, False, "Active"),
        ):
            conn.execute(
                "INSERT INTO product_snapshots (store_product_id, captured_at, price_rec, is_on_special, specials, "
                "thc_value, thc_unit, status) VALUES (%s, %s, %s, %s, %s, 21.5, 'p', %s)",
                (product, at, price, special, '[{"name": "Deal"}]' if special else None, status),
            )
    out = tmp_path / "snapshots-2026-11.parquet"
    result = export(env, "snapshots", "--month", "2026-11", "-o", str(out))
    assert result.returncode == 0, result.stderr
    got = pq.read_table(out).to_pylist()
    # the snapshot's Dutchie Status (#28, 7), None where the payload sent none
    assert [(r["price_rec"], r["is_on_special"], r["thc_unit"], r["status"]) for r in got] == [
        (10.0, True, "percent", "Active"),
        (11.0, False, "percent", None),
    ]
    assert json.loads(got[0]["specials"]) == [{"name": "Deal"}] and got[0]["provider_product_id"] == "p" * 24
    with open(tmp_path / "s.csv", "w"):
        pass
    assert export(env, "snapshots", "--month", "2026-11", "-o", str(tmp_path / "s.csv")).returncode == 0
    with open(tmp_path / "s.csv", newline="") as f:
        [first, second] = list(csv.DictReader(f))
    assert first["is_on_special"] == "true" and json.loads(first["specials"]) == [{"name": "Deal"}]
    assert (first["status"], second["status"]) == ("Active", "")


FORMULA = '=HYPERLINK("http://x","y")'


def test_a_name_a_spreadsheet_would_run_as_a_formula_is_text_in_csv_and_verbatim_in_jsonl(env, sql, tmp_path):
    ids = seed_events(sql)
    sql("UPDATE dispensaries SET name = %s WHERE id = %s", (FORMULA, ids["az"]))
    sql("UPDATE store_products SET name = %s, brand_name_raw = %s WHERE id = %s", ("-2+3", "@SUM(A1)", ids["a"]))
    sql("UPDATE store_products SET name = %s, brand_name_raw = %s WHERE id = %s", ("\tTab", "\rReturn", ids["b"]))
    rows = {}
    for ext in ("csv", "jsonl"):
        out = tmp_path / f"events.{ext}"
        assert export(env, "events", "--since", "2026-11-28", "--state", "AZ", "-o", str(out)).returncode == 0
        with open(out, newline="") as f:
            rows[ext] = {
                (r["store"], r["product"], r["brand"])
                for r in (csv.DictReader(f) if ext == "csv" else map(json.loads, f))
            }
    assert rows["csv"] == {("'" + FORMULA, "'-2+3", "'@SUM(A1)"), ("'" + FORMULA, "'\tTab", "'\rReturn")}
    assert rows["jsonl"] == {(FORMULA, "-2+3", "@SUM(A1)"), (FORMULA, "\tTab", "\rReturn")}  # data: as it is


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("events", "--since", "2026-11-29", "-o", "/proc/e.csv"), "cannot write /proc/e.csv"),  # even as root
        (("snapshots", "--month", "2026-11", "-o", "/proc/s.parquet"), "cannot write /proc/s.parquet"),
        (("events", "--since", "2026-11-29", "-o", "{missing}/e.jsonl"), "does not exist"),
        (("events", "--since", "2026-11-29", "-o", "e.xlsx"), "the format follows the extension"),
        (("events", "--since", "last week", "-o", "e.csv"), "not a date"),
        (("events", "-o", "e.csv"), "needs --since"),
        (("events", "--since", "2026-11-29", "--type", "restocked", "-o", "e.csv"), "unknown event type"),
        (("snapshots", "--month", "2026-13", "-o", "s.parquet"), "--month must be YYYY-MM"),
        (("snapshots", "--month", "2026-11", "--since", "2026-11-02", "-o", "s.csv"), "not both"),
        (("snapshots", "--since", "2026-11-09", "--until", "2026-11-02", "-o", "s.csv"), "after --since"),
        (("snapshots", "--until", "2026-11-02", "-o", "s.csv"), "needs --month YYYY-MM or --since"),
        (("events", "--since", "2026-11-29", "--until", "soon", "-o", "e.csv"), "--until: not a date"),
        (("market", "-o", "m.csv"), "needs --table"),
        (("products", "--state", "Arizona", "-o", "p.csv"), "not a two-letter state"),
        (("prices", "-o", "s.parquet"), "export what?"),
    ],
)
def test_bad_input_and_unwritable_folders_are_one_error_line(env, sql, tmp_path, args, message):
    seed_events(sql)
    args = tuple(a.format(missing=tmp_path / "missing") for a in args)
    result = export(env, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (
        result.stderr
    )
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".csv", ".jsonl", ".parquet", ".partial")]


def read(path):
    if path.suffix == ".csv":
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    return pq.read_table(path).to_pylist()


def test_events_carry_names_and_sizes_and_take_any_range(env, sql, tmp_path):
    ids = seed_events(sql)
    sql("""UPDATE store_products SET options = '[{"option": "1g"}, {"option": "1/8oz"}]' WHERE id = %s""", (ids["a"],))
    out = tmp_path / "events.parquet"
    # the 29th only: --until a date includes that day, and no more
    result = export(env, "events", "--since", "2026-11-29", "--until", "2026-11-29", "-o", str(out))
    assert result.returncode == 0, result.stderr
    got = read(out)
    want = sql(
        "SELECT e.id, d.name, d.state, sp.brand_name_raw, sp.name, sp.category FROM product_events e "
        "JOIN dispensaries d ON d.id = e.dispensary_id JOIN store_products sp ON sp.id = e.store_product_id "
        "WHERE e.occurred_at >= '2026-11-29' AND e.occurred_at < '2026-11-30' ORDER BY e.id"
    )
    assert [(r["id"], r["store"], r["state"], r["brand"], r["product"], r["category"]) for r in got] == [
        tuple(w) for w in want
    ]
    assert len(got) == 3 and {r["size"] for r in got if r["product"] == "Product a"} == {"1g, 1/8oz"}
    assert all(r["size"] is None for r in got if r["product"] != "Product a")
    # an ISO time is the first instant left out; --month works for events too
    month = tmp_path / "events.csv"
    assert export(env, "events", "--month", "2026-11", "-o", str(month)).returncode == 0
    assert len(read(month)) == 11
    until = export(env, "events", "--since", "2026-11-28", "--until", "2026-11-30T10:00:00", "-o", str(month))
    assert until.stdout.strip() == f"6 events written to {month}"


def test_snapshots_of_any_range_carry_the_products_names(env, sql, db, tmp_path):
    store = sql("INSERT INTO dispensaries (name, state, city) VALUES ('=Shop', 'AZ', 'Mesa') RETURNING id")[0][0]
    product = sql(
        "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, name, brand_name_raw, category, "
        """options) VALUES (%s, 'p1', 'Gelato', 'Gelato', 'Alpine', 'Flower', '[{"option": "3.5g"}]') RETURNING id""",
        (store,),
    )[0][0]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ensure_snapshot_partitions('2026-10-01', 3)")
        for day in ("2026-10-30", "2026-10-31", "2026-11-01", "2026-11-02", "2026-11-03"):
            conn.execute(
                "INSERT INTO product_snapshots (store_product_id, captured_at, price_rec) VALUES (%s, %s, 10)",
                (product, f"{day}T12:00:00Z"),
            )
    out = tmp_path / "week.csv"
    # across a month's boundary: both partitions, in time order
    result = export(env, "snapshots", "--since", "2026-10-31", "--until", "2026-11-02", "-o", str(out))
    assert result.returncode == 0, result.stderr
    rows = read(out)
    assert [r["captured_at"][:10] for r in rows] == ["2026-10-31", "2026-11-01", "2026-11-02"]
    first = rows[0]
    assert (first["store"], first["state"], first["city"], first["product"], first["brand"]) == (
        "'=Shop",  # a spreadsheet's formula, as text
        "AZ",
        "Mesa",
        "Gelato",
        "Alpine",
    )
    assert (first["category"], first["size"], first["dispensary_id"]) == ("Flower", "3.5g", str(store))
    assert list(rows[0])[:11] == [
        "store_product_id",
        "dispensary_id",
        "provider_product_id",
        "store",
        "state",
        "city",
        "platform",
        "product",
        "brand",
        "category",
        "size",
    ]


def test_products_and_market_tables(env, sql, tmp_path):
    ids = seed_events(sql)
    sql(
        "UPDATE store_products SET unit_price = 5.7143, unit_price_basis = 'g', stock_status = 'oos', "
        """is_in_stock = false, options = '[{"option": "3.5g", "price_rec": 20}]' WHERE id = %s""",
        (ids["a"],),
    )
    sql(
        "INSERT INTO product_event_state (store_product_id, oos_since) VALUES (%s, '2026-11-30T10:00:00Z') "
        "ON CONFLICT (store_product_id) DO UPDATE SET oos_since = excluded.oos_since",
        (ids["a"],),
    )
    brand = sql("INSERT INTO brands (key, name) VALUES ('k:stiiizy', 'STIIIZY') RETURNING id")[0][0]
    sql("UPDATE store_products SET canonical_brand_id = %s WHERE brand_name_raw = 'Stiiizy'", (brand,))
    out = tmp_path / "menus.parquet"
    result = export(env, "products", "--state", "az", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"2 products written to {out}"
    rows = {r["provider_product_id"]: r for r in read(out)}
    a = rows["a" * 24]
    assert (a["store"], a["product"], a["brand"], a["canonical_brand"], a["size"]) == (
        "Green AZ",
        "Product a",
        "Stiiizy",
        "STIIIZY",
        "3.5g",
    )
    assert (a["unit_price"], a["unit_price_basis"], a["stock_status"]) == (5.7143, "g", "oos")
    assert a["oos_since"].isoformat() == "2026-11-30T10:00:00+00:00" and rows["b" * 24]["oos_since"] is None
    assert json.loads(a["options"]) == [{"option": "3.5g", "price_rec": 20}]
    # a canonical brand's name finds its products in every state
    assert export(env, "products", "--brand", "stiiizy", "-o", str(tmp_path / "b.csv")).returncode == 0
    assert {r["store"] for r in read(tmp_path / "b.csv")} == {"Green AZ", "Blue CA"}

    sql(
        "INSERT INTO market_brand_daily (state, day, canonical_brand_id, stores, stores_crawled, products, "
        "store_products, median_price) VALUES ('AZ', '2026-11-29', %s, 1, 4, 1, 1, 20), "
        "('AZ', '2026-11-30', %s, 2, 4, 1, 2, 19), ('CA', '2026-11-30', %s, 1, 1, 1, 1, 33)",
        (brand, brand, brand),
    )
    market = tmp_path / "brands.csv"
    result = export(env, "market", "--table", "brands", "--state", "AZ", "--since", "2026-11-30", "-o", str(market))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"1 brands rows written to {market}"
    [row] = read(market)
    assert (row["day"], row["brand"], row["availability"], row["median_price"]) == (
        "2026-11-30",
        "STIIIZY",
        "0.5",
        "19.0",
    )
