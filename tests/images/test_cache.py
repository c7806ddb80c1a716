"""DiskCache: /img's local cache folder stays within its bound (least recently used out first),
picks up what an earlier process left, and never serves a half-written file."""

from __future__ import annotations

from cannaspider.images.cache import DiskCache


def name(i: int) -> str:
    return f"{i:032x}.webp"


def test_bounded_least_recently_used_first(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=1000)
    for i in range(3):
        cache.put(name(i), bytes(300))
    assert cache.size == 900 and cache.get(name(0)) == bytes(300)  # 0 is now the most recent
    cache.put(name(3), bytes(300))  # over the bound: 1 goes, the least recently used
    assert cache.get(name(1)) is None and name(1) not in cache
    assert all(cache.get(name(i)) is not None for i in (0, 2, 3))
    assert cache.size == 900
    on_disk = sorted(p.name for p in tmp_path.rglob("*.webp"))
    assert on_disk == sorted(name(i) for i in (0, 2, 3))
    cache.put(name(9), bytes(2000))  # larger than the whole cache: not kept, nothing evicted
    assert name(9) not in cache and cache.size == 900


def test_a_new_process_finds_the_files_and_enforces_the_bound(tmp_path):
    first = DiskCache(tmp_path, max_bytes=10_000)
    for i in range(5):
        first.put(name(i), bytes(100 * (i + 1)))
    (tmp_path / name(0)[:2] / f".{name(7)}.123.tmp").write_bytes(b"half")  # a crash mid-write
    again = DiskCache(tmp_path, max_bytes=10_000)
    assert again.get(name(4)) == bytes(500) and again.size == 1500 and name(7) not in again
    smaller = DiskCache(tmp_path, max_bytes=1000)  # the bound was lowered: the oldest go at start
    assert smaller.size <= 1000 and name(4) in smaller


def test_a_file_removed_behind_its_back_is_a_miss(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=1000)
    cache.put(name(1), b"x")
    (tmp_path / name(1)[:2] / name(1)).unlink()
    assert cache.get(name(1)) is None and cache.size == 0


def test_an_unwritable_folder_costs_the_entry_not_the_answer(tmp_path):
    (tmp_path / "file").write_text("")
    cache = DiskCache(tmp_path / "file" / "below", max_bytes=1000)  # a folder that cannot exist
    cache.put(name(1), b"x")
    assert cache.get(name(1)) is None and cache.size == 0
