"""Each proxy's rotation state, by scrapy-rotating-proxies' own state machine (`Proxies`: good,
unchecked, dead with an exponential, jittered backoff and reanimation), so that the pool
(stealth/pool.py) rotates as RotatingProxyMiddleware does. Rotating-proxies keys its proxies by
URL string; ours are rows whose address an operator may edit, so they are keyed by row id (see
stealth/proxies.py), and the set of ids follows the `proxies` table as the pool re-reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from rotating_proxies.expire import Proxies, ProxyState, exp_backoff_full_jitter


class IdStates(Proxies):  # type: ignore[misc]  # rotating_proxies is untyped
    """rotating_proxies' state machine keyed by proxy row id instead of a URL string."""

    def __init__(self, backoff: Callable[[int], float]) -> None:
        self.proxies: dict[int, ProxyState] = {}
        self.proxies_by_hostport: dict[str, int] = {}  # unused: we never look proxies up by address
        self.unchecked: set[int] = set()
        self.good: set[int] = set()
        self.dead: set[int] = set()
        self.backoff = backoff

    def sync(self, ids: set[int]) -> None:
        """Take in new rows, forget rows that were disabled or deleted."""
        for gone in set(self.proxies) - ids:
            del self.proxies[gone]
            self.unchecked.discard(gone)
            self.good.discard(gone)
            self.dead.discard(gone)
        for new in ids - set(self.proxies):
            self.proxies[new] = ProxyState()
            self.unchecked.add(new)


def _no_backoff(attempt: int) -> float:
    return 0.0


def backoff(base_s: float, cap_s: float) -> Callable[[int], float]:
    """A failed proxy's backoff: rotating-proxies' full-jitter exponential from STEALTH_PROXY_BACKOFF_S
    up to STEALTH_PROXY_BACKOFF_CAP_S; none when the base is 0."""
    return partial(exp_backoff_full_jitter, base=base_s, cap=cap_s) if base_s > 0 else _no_backoff
