"""Switchable faults for the sandbox, per store or by rate, set over its control API.

A rule fires when its kind is asked for, its store/operation/page match and a draw under
`rate` succeeds (a seeded RNG, so runs repeat: cleared, as a sandbox reset does, the switchboard
draws the same sequence again, whatever a session's earlier tests drew). `times` limits how often
it fires. Store websites (sandbox/websites.py) ask for block403 and challenge503 with the
operation "website": a rule with operation "*" blocks a proxy's website pages as well as its API
requests. Images ask for `slow` with the operation "image" (a rule for "*" slows them too).
"""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass, field

TRANSPORT_KINDS = (
    "block403",
    "challenge503",
    "error500",
    "rate_limited",
    "slow",
    "malformed",
    "truncated",
    "graphql_errors",
    "deep_nesting",  # a 200 whose JSON nests NESTING_DEPTH arrays: json.loads raises RecursionError
    # the good answer, its compressed stream cut in half or garbled (sandbox/edge_compression.py);
    # an answer sent uncompressed (no Accept-Encoding) is not touched
    "truncated_compressed",
    "corrupt_compressed",
)
# empty_menu: a well-formed empty menu (`products: []`, `totalCount: 0`), what the real API answers
# to a broken query (`Status: null`), after an API change, or for a store whose online menu went dark
PAYLOAD_KINDS = ("lying_total", "endless", "duplicates", "empty_menu")
# Jane's menus only (sandbox/jane_api.py): a page that lost a product, nbHits that moves after page 0,
# a page of OVERSIZED_BYTES (its hits whole, the first one carrying a description that long), and the
# same page cut in half (the connection dropped 25 MB in), a page whose first hit lost its product_id
JANE_KINDS = ("short_page", "total_changed", "oversized", "oversized_cut", "no_id")
OVERSIZED_BYTES = 50 * 1024 * 1024
KINDS = TRANSPORT_KINDS + PAYLOAD_KINDS + JANE_KINDS
NESTING_DEPTH = 5000


def deeply_nested_json(depth: int = NESTING_DEPTH) -> str:
    """Valid JSON too deep for a recursive parser: a hostile server's answer (issue 16)."""
    return '{"data": ' + "[" * depth + "]" * depth + "}"


@dataclass
class FaultRule:
    kind: str
    store: str = "*"  # store id, cName, or "*"
    operation: str = "*"  # GraphQL operationName, "website" (store websites) or "*"
    proxy: str = "*"  # the name of the sandbox proxy the request came through (x-sandbox-proxy), or "*"
    rate: float = 1.0
    pages: list[int] | None = None
    times: int | None = None  # None: unlimited
    delay: float = 2.0  # slow: seconds
    factor: float = 2.0  # lying_total: reported totalCount = real * factor
    retry_after: str | None = "1"  # rate_limited: the 429's Retry-After (seconds or HTTP date); None: no header
    fired: int = field(default=0)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        if not 0 <= self.rate <= 1:
            raise ValueError("rate must be within [0, 1]")


class FaultSwitchboard:
    def __init__(self, seed: int = 0):
        self._rules: list[FaultRule] = []
        self._seed = seed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def set_rules(self, rules: list[dict]) -> list[FaultRule]:
        parsed = [FaultRule(**{k: v for k, v in r.items() if k != "fired"}) for r in rules]
        with self._lock:
            self._rules = parsed
        return parsed

    def add(self, **rule) -> FaultRule:
        parsed = FaultRule(**rule)
        with self._lock:
            self._rules.append(parsed)
        return parsed

    def clear(self) -> None:
        with self._lock:
            self._rules = []
            self._rng.seed(self._seed)

    def as_dicts(self) -> list[dict]:
        with self._lock:
            return [asdict(r) for r in self._rules]

    def could_fire(self, kinds: tuple[str, ...]) -> bool:
        with self._lock:
            return any(rule.kind in kinds for rule in self._rules)

    def fire(
        self,
        kinds: tuple[str, ...],
        operation: str,
        store_keys: tuple[str, ...],
        page: int | None,
        proxy: str = "",
    ) -> list[FaultRule]:
        fired = []
        with self._lock:
            for rule in self._rules:
                if rule.kind not in kinds:
                    continue
                if rule.operation not in ("*", operation):
                    continue
                if rule.store != "*" and rule.store not in store_keys:
                    continue
                if rule.proxy not in ("*", proxy):
                    continue
                if rule.pages is not None and page not in rule.pages:
                    continue
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                if rule.rate < 1 and self._rng.random() >= rule.rate:
                    continue
                rule.fired += 1
                fired.append(rule)
        return fired
