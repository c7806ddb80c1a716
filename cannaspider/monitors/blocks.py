"""Blocks per proxy and stale persisted-hash fallbacks.

A block is counted per proxy under `cannaspider/proxy/<proxy id>/blocked` when the proxy
middleware records it; responses classified as blocked without a proxy (stat
`cannaspider/graphql_failure/blocked`) count for "direct". A stale-hash fallback (stat
`cannaspider/stale_hash_fallbacks`) means Dutchie rotated a persisted-query hash: the crawl still
worked (it sent the full query) but DUTCHIE_PERSISTED_HASHES wants updating (docs/dutchie.md)."""

from __future__ import annotations

import re
from typing import Any

from spidermon import monitors

from cannaspider.monitors.base import HealthMonitor

PROXY_BLOCK_STAT = re.compile(r"^cannaspider/proxy/(?P<proxy>[^/]+)/blocked$")
DIRECT_BLOCK_STAT = "cannaspider/graphql_failure/blocked"


def blocks_per_proxy(stats: dict[str, Any]) -> dict[str, int]:
    per_proxy: dict[str, int] = {}
    for key, value in stats.items():
        match = PROXY_BLOCK_STAT.match(key)
        if match and isinstance(value, int):
            per_proxy[match["proxy"]] = per_proxy.get(match["proxy"], 0) + value
    if not per_proxy and isinstance(stats.get(DIRECT_BLOCK_STAT), int):
        per_proxy["direct"] = stats[DIRECT_BLOCK_STAT]
    return per_proxy


@monitors.name("Blocks")
class BlocksPerProxyMonitor(HealthMonitor):
    @monitors.name("blocks per proxy within HEALTH_MAX_BLOCKS_PER_PROXY")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_blocks_per_proxy(self) -> None:
        limit = self.settings.getint("HEALTH_MAX_BLOCKS_PER_PROXY")
        over = {p: n for p, n in sorted(blocks_per_proxy(self.stats).items()) if n > limit}
        listed = ", ".join(f"{p}: {n}" for p, n in over.items())
        self.assertFalse(over, f"blocked more than {limit} times (HEALTH_MAX_BLOCKS_PER_PROXY): {listed}")


@monitors.name("Persisted hashes")
class StaleHashMonitor(HealthMonitor):
    @monitors.name("stale persisted-hash fallbacks within HEALTH_MAX_STALE_HASH_FALLBACKS")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_stale_hash_fallbacks(self) -> None:
        n = self.stat("cannaspider/stale_hash_fallbacks")
        limit = self.settings.getint("HEALTH_MAX_STALE_HASH_FALLBACKS")
        self.assertLessEqual(
            n, limit, f"{n} requests fell back to the full query: update DUTCHIE_PERSISTED_HASHES (limit {limit})"
        )
