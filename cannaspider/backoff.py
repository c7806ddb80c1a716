"""The wait before trying again what failed: base · 2^(attempt-1), capped, times a random factor
(jitter) so that what failed together (a blocked proxy pool, a database restart, a receiver
down) does not all come back at the same instant. One rule for the task queue's retries
(tasks/queue/outcomes.py) and the alerts' deliveries (alerts/sender.py); each reads its base and
cap from its own settings in settings.py and names its own jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass

from scrapy.settings import BaseSettings


@dataclass(frozen=True)
class Backoff:
    base_s: float  # the wait after the first failed attempt, before jitter
    cap_s: float  # no wait grows past this (before jitter)
    jitter: tuple[float, float]  # the wait is multiplied by a factor drawn uniformly from [low, high)

    @classmethod
    def from_settings(cls, settings: BaseSettings, base: str, cap: str, jitter: tuple[float, float]) -> Backoff:
        """From the settings named `base` and `cap`."""
        return cls(settings.getfloat(base), settings.getfloat(cap), jitter)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt `attempt` (1, 2, …)."""
        low, high = self.jitter
        wait = min(self.base_s * 2.0 ** max(attempt - 1, 0), self.cap_s)
        return float(wait * (low + random.random() * (high - low)))  # spreading retries, not a secret
