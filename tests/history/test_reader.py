"""cannaspider/history/reader.py's single-product read: the row groups its statistics name, and
the same rows as a whole scan, in a file of many groups; a file not sorted by product is read
whole, not trusted."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cannaspider.history import reader


def month_table(products: int, crawls: int) -> pa.Table:
    start = datetime(2026, 7, 1, tzinfo=UTC)
    rows = [(p, start + timedelta(hours=7 * c), p * 1000 + c) for p in range(1, products + 1) for c in range(crawls)]
    ids, times, runs = zip(*rows, strict=True)
    return pa.table(
        {
            "store_product_id": pa.array(ids, pa.int64()),
            "captured_at": pa.array(times, pa.timestamp("us", tz="UTC")),
            "crawl_run_id": pa.array(runs, pa.int64()),
        }
    )


def expected(table: pa.Table, ids: list[int]) -> list[int]:
    chosen = table.filter(pc.is_in(table["store_product_id"], value_set=pa.array(ids, pa.int64())))
    return chosen.sort_by("captured_at")["crawl_run_id"].to_pylist()


def test_a_product_is_read_from_the_groups_that_hold_it(tmp_path):
    table = month_table(products=60, crawls=7)
    path = tmp_path / "m.parquet"
    pq.write_table(table, path, row_group_size=10)  # a product across one or two groups
    index = reader._index(path)
    assert index.metadata.num_row_groups == 42 and index.lows == sorted(index.lows)
    for ids in ([1], [17], [60], [3, 44], [61], [0]):
        got = reader.product_table([path], ids, ("captured_at", "crawl_run_id"))
        assert got["crawl_run_id"].to_pylist() == expected(table, ids), ids
    # across two months' files, in time order
    later = month_table(products=60, crawls=7)
    later = later.set_column(1, "captured_at", pc.add(later["captured_at"], pa.scalar(timedelta(days=31))))
    path2 = tmp_path / "m2.parquet"
    pq.write_table(later, path2, row_group_size=10)
    got = reader.product_table([path2, path], [17], ("captured_at", "crawl_run_id"))
    assert got["crawl_run_id"].to_pylist() == expected(table, [17]) + expected(later, [17])


def test_a_file_not_sorted_by_product_is_read_whole(tmp_path):
    table = month_table(products=30, crawls=5)
    order = list(range(table.num_rows))
    random.Random(3).shuffle(order)
    shuffled = table.take(pa.array(order))
    path = tmp_path / "unsorted.parquet"
    pq.write_table(shuffled, path, row_group_size=8)
    assert reader._index(path).lows == []
    for ids in ([1], [30], [2, 29]):
        got = reader.product_table([path], ids, ("captured_at", "crawl_run_id"))
        # (two products' rows share their times: their order among equal times is not the point)
        assert sorted(got["crawl_run_id"].to_pylist()) == sorted(expected(table, ids))
        assert got["captured_at"].to_pylist() == sorted(got["captured_at"].to_pylist())
