"""Proxy health as the `proxies` table keeps it: what happened to one proxy since the last write
(HealthBatch) and the one UPDATE that adds it to its row (FLUSH_HEALTH), so that health costs one
statement per proxy per batch, never one per request. The crawl's pool (stealth/pool.py) writes
its batches every STEALTH_HEALTH_FLUSH_S and at close; `scrapy proxies check`
(cannaspider/commands/proxies.py) writes an inactive proxy's check with the same statement, so a
check and a crawl rate a proxy alike.

`success_count` and `failure_count` (failure *events*) are lifetime counters. The deactivation
reads `recent_attempts` (migration 027): the proxy's last STEALTH_PROXY_ATTEMPT_WINDOW attempts,
oldest first, `S` a success and `F` a failure event. The batch's attempts are appended in order
(so the crawls sharing a proxy add theirs to one window), and the update that leaves
STEALTH_PROXY_MAX_FAILURES `F` in the window deactivates the proxy (`is_active = false`,
`deactivated_at` set, `next_probe_at` PROXY_REPROBE_AFTER_S later: `scrapy schedule` re-probes it,
stealth/probe.py). A row already inactive stays so: enabling is an operator's (docs/stealth.md,
"Failures").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scrapy.settings import BaseSettings

SUCCESS, FAILURE = "S", "F"

FLUSH_HEALTH = """
UPDATE proxies SET
    success_count = COALESCE(success_count, 0) + %(successes)s,
    avg_response_time_ms = CASE WHEN %(successes)s > 0
        THEN round((COALESCE(avg_response_time_ms, 0)::numeric * COALESCE(success_count, 0) + %(total_ms)s)
                   / (COALESCE(success_count, 0) + %(successes)s))::integer
        ELSE avg_response_time_ms END,
    last_used_at = GREATEST(last_used_at, %(last_used_at)s),
    failure_count = COALESCE(failure_count, 0) + %(failures)s,
    recent_attempts = {window},
    last_failure_at = COALESCE(%(last_failure_at)s, last_failure_at),
    last_error = COALESCE(%(last_error)s, last_error),
    is_active = is_active AND NOT {deactivates},
    -- deactivated by its failures (not by an operator): re-probed from then on (stealth/probe.py)
    deactivated_at = CASE WHEN is_active AND {deactivates} THEN now() ELSE deactivated_at END,
    next_probe_at = CASE WHEN is_active AND {deactivates}
                         THEN now() + %(reprobe_after_s)s * interval '1 second' ELSE next_probe_at END,
    probe_failures = CASE WHEN is_active AND {deactivates} THEN 0 ELSE probe_failures END
WHERE id = %(id)s
"""
_WINDOW = "right(recent_attempts || %(attempts)s, %(window)s)"
FLUSH_HEALTH = FLUSH_HEALTH.format(
    window=_WINDOW,
    # a failure in this batch is needed: a batch of successes never deactivates (a row that the
    # rule was changed under, a smaller window, waits for its next failure)
    deactivates=f"(%(failures)s > 0 AND length(replace({_WINDOW}, 'S', '')) >= %(max_failures)s)",
)


@dataclass
class HealthBatch:
    """What happened to one proxy since the last flush."""

    successes: int = 0
    total_ms: float = 0.0
    failures: int = 0  # failure events
    attempts: str = ""  # its attempts in order, S or F (at most the window's last ones)
    last_used_at: datetime | None = None
    last_failure_at: datetime | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class FailureRule:
    """When a proxy is deactivated: `max_failures` failure events among its last `window` attempts."""

    max_failures: int
    window: int

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FailureRule:
        return cls(settings.getint("STEALTH_PROXY_MAX_FAILURES"), settings.getint("STEALTH_PROXY_ATTEMPT_WINDOW"))

    def deactivates(self, attempts: str) -> bool:
        return attempts[-self.window :].count(FAILURE) >= self.max_failures


def health_params(proxy_id: int, h: HealthBatch, rule: FailureRule, reprobe_after_s: float) -> dict[str, object]:
    """FLUSH_HEALTH's parameters for one proxy's batch."""
    return {
        "id": proxy_id,
        "successes": h.successes,
        "total_ms": h.total_ms,
        "last_used_at": h.last_used_at,
        "failures": h.failures,
        "attempts": h.attempts[-rule.window :],
        "window": rule.window,
        "last_failure_at": h.last_failure_at,
        "last_error": h.last_error,
        "max_failures": rule.max_failures,
        "reprobe_after_s": reprobe_after_s,
    }


def merge_unwritten(pending: dict[int, HealthBatch], unwritten: dict[int, HealthBatch]) -> None:
    """Put back a batch whose write was rolled back into `pending`, which holds what came since:
    counts add up, the older batch's attempts come first, the newer batch's times and error win."""
    for pid, old in unwritten.items():
        new = pending.get(pid)
        if new is None:
            pending[pid] = old
            continue
        new.successes += old.successes
        new.total_ms += old.total_ms
        new.failures += old.failures
        new.attempts = old.attempts + new.attempts
        new.last_used_at = new.last_used_at or old.last_used_at
        new.last_failure_at = new.last_failure_at or old.last_failure_at
        new.last_error = new.last_error or old.last_error
