"""A task drain's limits (`DrainConfig`), read from the TASK_* settings.

Apart from the drain (cannaspider/tasks/drain.py) so that what a drain may do (how many tasks it
holds, how it claims, how long it waits) reads in one place; the defaults are settings.py's, and
only there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy.settings import BaseSettings

from cannaspider.project_settings import project_settings
from cannaspider.tasks.queue import Backoff, task_backoff


@dataclass(frozen=True)
class DrainConfig:
    """A drain's limits, read from the TASK_* settings (their defaults: settings.py, and only there)."""

    slots: int  # tasks held (stores crawled) at once
    batch: int  # most tasks claimed by one statement
    lease_s: float
    heartbeat_s: float
    follow: bool
    poll_s: float
    listen: bool  # wake on NOTIFY; False: poll only
    backoff: Backoff
    reconnect_s: float  # how long one queue operation retries a lost connection
    outage_wait_max_s: float  # with follow: longest wait between claims in an outage

    @classmethod
    def of_project(cls, **overrides: Any) -> DrainConfig:
        """The project's settings (a drain built without a crawler: tests, benchmarks)."""
        return cls.from_settings(project_settings(), **overrides)

    @classmethod
    def from_settings(cls, settings: BaseSettings, **overrides: Any) -> DrainConfig:
        values: dict[str, Any] = {
            "slots": settings.getint("TASK_SLOTS"),
            "batch": settings.getint("TASK_CLAIM_BATCH"),
            "lease_s": settings.getfloat("TASK_LEASE_S"),
            "heartbeat_s": settings.getfloat("TASK_HEARTBEAT_S"),
            "follow": False,  # a spider's -a follow=1, given as an override
            "poll_s": settings.getfloat("TASK_POLL_S"),
            "listen": settings.getbool("TASK_LISTEN"),
            "backoff": task_backoff(settings),
            "reconnect_s": settings.getfloat("TASK_RECONNECT_S"),
            "outage_wait_max_s": settings.getfloat("TASK_OUTAGE_WAIT_MAX_S"),
        }
        values.update(overrides)
        return cls(**values)
