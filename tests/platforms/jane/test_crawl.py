"""Jane end to end: `scrapy crawl` runs of the role spiders against the sandbox's Jane (Algolia)
and the test database: a whole menu stored, the out-of-stock story after three complete misses,
store discovery into the shared dispensaries table, and every fault of the Algolia host leaving the
crawl incomplete, with its reason, and nothing marked missing."""

from __future__ import annotations

import re

import psycopg
import pytest

from tests.helpers import NO_IMAGES, SandboxClient, products_of, runs_of

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def jane(sandbox: SandboxClient, method: str, path: str, body: object | None = None):
    return sandbox.call(method, f"/_sandbox/jane/{path}", body)


def add_jane_store(db_url: str, doc: dict, *, resolved: bool = True) -> int:
    """A sandbox Jane store (as /_sandbox/jane/stores lists it) as a dispensaries row."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO dispensaries (name, slug, menu_url, state, city, platform, platform_dispensary_id) "
            "VALUES (%s, %s, %s, %s, %s, 'jane', %s) RETURNING id",
            (
                doc["name"],
                doc["url_slug"],
                doc["menu_url"],
                doc["state"],
                doc["city"],
                str(doc["id"]) if resolved else None,
            ),
        ).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def jane_store(sandbox) -> dict:
    return jane(sandbox, "GET", "stores?state=AZ")[0]


def menu(sandbox: SandboxClient, store: dict, epoch: int) -> set[str]:
    return set(jane(sandbox, "GET", f"menu/{store['id']}?epoch={epoch}")["product_ids"])


def test_a_jane_menu_is_stored_whole_page_by_page(crawl, db, sandbox, jane_store, sql):
    d = add_jane_store(db, jane_store)
    result = crawl("product_discovery", "-s", "JANE_PER_PAGE=50", dispensary_id=d)
    assert result.returncode == 0, result.stderr[-3000:]
    on_menu = menu(sandbox, jane_store, 0)
    assert set(products_of(db, d)) == on_menu
    status, error, seen, new, missed, oos, pages = runs_of(db, d)[0]
    assert (status, error, seen, new, missed, oos) == ("complete", None, len(on_menu), len(on_menu), 0, 0)
    assert pages == -(-len(on_menu) // 50) + (len(on_menu) % 50 == 0)  # a full last page is probed once
    rows = sql(
        "SELECT provider, category, options FROM store_products WHERE dispensary_id = %s AND category = 'Flower'", (d,)
    )
    assert rows and {r[0] for r in rows} == {"jane"}
    sizes = {o["size_value"] for r in rows for o in r[2] if o["size_unit"] == "g"}
    assert sizes <= {0.5, 1.0, 2.0, 3.5, 7.0, 14.0, 28.0} and 3.5 in sizes


def test_three_complete_misses_mark_a_jane_product_out_of_stock(crawl, db, sandbox, jane_store):
    d = add_jane_store(db, jane_store)
    vanishing = menu(sandbox, jane_store, 0) - menu(sandbox, jane_store, 3)  # gone at epochs 1..3
    assert vanishing
    history = []
    for epoch in range(5):
        jane(sandbox, "POST", "epoch", {"epoch": epoch})
        assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0
        history.append(products_of(db, d))
    gone = next(iter(vanishing))
    assert [history[e][gone] for e in range(5)] == [
        (0, "in_stock", True),
        (1, "in_stock", True),
        (2, "in_stock", True),
        (3, "oos", False),
        (0, "in_stock", True),
    ]
    runs = runs_of(db, d)
    assert [r[0] for r in runs] == ["complete"] * 5 and runs[3][5] == len(vanishing)


FAULTS = [
    ({"kind": "error500", "pages": [1]}, "page 1: request failed"),
    ({"kind": "rate_limited", "pages": [1], "retry_after": None}, "page 1: request failed"),
    ({"kind": "block403", "pages": [1]}, "blocked: HTTP 403"),
    ({"kind": "malformed", "pages": [1]}, "malformed: body is not valid JSON"),
    ({"kind": "short_page", "pages": [1]}, "of nbHits"),
    ({"kind": "duplicates", "pages": [1]}, "repeated only products already seen"),
    ({"kind": "total_changed"}, "nbHits changed from"),
    ({"kind": "lying_total", "factor": 2}, "of nbHits"),
    ({"kind": "endless"}, "page cap"),
]


def test_every_fault_of_the_algolia_host_leaves_the_crawl_incomplete_and_marks_nothing(crawl, db, sandbox):
    # one store per fault, all in one crawl (each its own unit, its own run): a crawl per fault was
    # nine process starts for a second of crawling each; each store's fault is its alone
    stores = jane(sandbox, "GET", "stores")[: len(FAULTS)]
    assert len(stores) == len(FAULTS)
    ids = [add_jane_store(db, s) for s in stores]
    options = ("-s", "JANE_PER_PAGE=50", "-s", "JANE_MAX_PAGES=8", "-s", "RATE_LIMIT_MAX_RETRIES=1")
    options += ("-s", "RATE_LIMIT_BACKOFF_S=0.1", "-s", "RETRY_TIMES=1", "-s", "STEALTH_BLOCK_RETRIES=0", *NO_IMAGES)
    assert crawl("product_resync", *options, dispensary_id=",".join(map(str, ids))).returncode == 0
    before = {d: products_of(db, d) for d in ids}
    jane(sandbox, "POST", "epoch", {"epoch": 3})  # products vanish: only a complete crawl may count them
    rules = [{**fault, "store": str(store["id"])} for (fault, _), store in zip(FAULTS, stores, strict=True)]
    jane(sandbox, "POST", "faults", {"rules": rules})
    result = crawl("product_resync", *options, dispensary_id=",".join(map(str, ids)))
    for (fault, reason), d in zip(FAULTS, ids, strict=True):
        status, error, *_ = runs_of(db, d)[-1]
        assert status == "incomplete" and reason in (error or ""), (fault, error)
        after = products_of(db, d)
        assert all(after[p][0] == 0 and after[p][1] == "in_stock" for p in before[d]), fault
    # the rate-limited page was waited out up to its bound first (middlewares/rate_limit.py)
    assert "still rate limited after 1 retries" in result.stderr
    # a wrong key: Algolia's 403, said so
    jane(sandbox, "POST", "faults", {"rules": []})
    crawl("product_resync", *options, "-s", "JANE_ALGOLIA_API_KEY=not-the-key", dispensary_id=ids[0])
    status, error, *_ = runs_of(db, ids[0])[-1]
    assert status == "incomplete" and "refused the application id or API key" in error
    assert "not-the-key" not in error


def test_an_empty_jane_menu_marks_nothing_missing(crawl, db, sandbox, jane_store):
    d = add_jane_store(db, jane_store)
    assert crawl("product_resync", *NO_IMAGES, dispensary_id=d).returncode == 0
    before = products_of(db, d)
    jane(sandbox, "POST", "faults", {"rules": [{"kind": "empty_menu", "store": str(jane_store["id"])}]})
    for _ in range(3):
        crawl("product_resync", *NO_IMAGES, dispensary_id=d)
    after = products_of(db, d)
    assert all(after[p][1] == "in_stock" for p in before)


def test_store_discovery_of_jane_fills_the_shared_table_idempotently(crawl, db, sandbox, sql):
    for _ in range(2):
        result = crawl("store_discovery", state="AZ", platform="jane")
        assert result.returncode == 0, result.stderr[-3000:]
    expected = {str(s["id"]) for s in jane(sandbox, "GET", "stores?state=AZ")}
    rows = sql("SELECT platform, platform_dispensary_id, city, menu_url FROM dispensaries")
    assert {r[1] for r in rows} == expected and {r[0] for r in rows} == {"jane"}
    dutchie_cities = {s["city"] for s in sandbox.stores("AZ")}
    assert {r[2] for r in rows} <= dutchie_cities
    assert all(r[3].startswith("https://www.iheartjane.com/stores/") for r in rows)
    # discovery's own log keys them by platform: Jane's rows, not Dutchie's (migration 040)
    seen = sql("SELECT platform, platform_dispensary_id, dispensary_id IS NOT NULL FROM discovery_locations")
    assert sorted(seen) == sorted(("jane", pid, True) for pid in expected)
    assert sql("SELECT count(*) FROM dutchie_discovery_locations")[0][0] == 0


def stat(stderr: str, name: str) -> int:
    """A counter of the crawl's stats dump (0: never counted)."""
    found = re.search(rf"'{re.escape(name)}': (\d+)", stderr)
    return int(found.group(1)) if found else 0


def test_a_50_mb_page_is_read_whole_and_the_same_page_cut_ends_the_crawl_incomplete(crawl, db, sandbox, jane_store):
    """A page of 50 MB (a 50 MB description on one hit) is read as Dutchie's would be: no cap
    below Scrapy's DOWNLOAD_MAXSIZE (1 GiB) stops it, every product arrives, and the bytes are in
    the stats; the same page cut halfway is a malformed answer, counted, and the crawl incomplete
    with the reason: nothing marked missing, nothing lost."""
    d = add_jane_store(db, jane_store)
    options = ("-s", "JANE_PER_PAGE=50", "-s", "RETRY_TIMES=0", *NO_IMAGES)
    assert crawl("product_resync", *options, dispensary_id=d).returncode == 0
    before = products_of(db, d)
    store = str(jane_store["id"])
    jane(sandbox, "POST", "faults", {"rules": [{"kind": "oversized", "store": store, "pages": [1]}]})
    whole = crawl("product_resync", *options, dispensary_id=d)
    assert whole.returncode == 0, whole.stderr[-3000:]
    status, error, seen, *_ = runs_of(db, d)[-1]
    assert (status, error, seen) == ("complete", None, len(before))
    assert stat(whole.stderr, "downloader/response_bytes") > 50 * 1024 * 1024
    assert products_of(db, d) == before  # nothing lost, nothing missed
    jane(sandbox, "POST", "epoch", {"epoch": 3})  # products vanish: only a complete crawl may count them
    jane(sandbox, "POST", "faults", {"rules": [{"kind": "oversized_cut", "store": store, "pages": [1]}]})
    cut = crawl("product_resync", *options, dispensary_id=d)
    status, error, *_ = runs_of(db, d)[-1]
    assert status == "incomplete" and "page 1: malformed: body is not valid JSON" in (error or ""), error
    assert stat(cut.stderr, "cannaspider/graphql_failure/malformed") == 1
    after = products_of(db, d)
    assert all(after[p][0] == 0 and after[p][1] == "in_stock" for p in before)


def test_a_jane_product_without_an_id_is_dropped_counted_and_marks_nothing_missing(crawl, db, sandbox, jane_store):
    d = add_jane_store(db, jane_store)
    options = ("-s", "JANE_PER_PAGE=50", *NO_IMAGES)
    assert crawl("product_resync", *options, dispensary_id=d).returncode == 0
    before = products_of(db, d)
    jane(sandbox, "POST", "epoch", {"epoch": 3})  # products vanish: only a complete crawl may count them
    store = str(jane_store["id"])
    jane(sandbox, "POST", "faults", {"rules": [{"kind": "no_id", "store": store, "pages": [0]}]})
    for _ in range(3):  # three crawls that would each miss the vanished products
        result = crawl("product_resync", *options, dispensary_id=d)
        assert result.returncode == 3  # a unit of work incomplete (its `error:` line)
        assert stat(result.stderr, "cannaspider/products_without_id") == 1
        assert stat(result.stderr, "item_dropped_count") == 1  # the normalizer's NormalizationError
        status, error, *_ = runs_of(db, d)[-1]
        assert status == "incomplete" and "1 product(s) had no usable" in (error or ""), error
        assert "product_id" in error  # the field Jane's products lack
    after = products_of(db, d)
    assert set(after) <= set(before) | menu(sandbox, jane_store, 3)  # none stored without its id
    assert all(after[p][0] == 0 and after[p][1] == "in_stock" for p in before)
