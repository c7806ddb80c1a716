"""The one retry-wait rule (cannaspider/backoff.py) the task queue and the alerts share."""

from __future__ import annotations

from cannaspider.backoff import Backoff
from cannaspider.project_settings import project_settings
from cannaspider.tasks.queue import outcomes, task_backoff
from cannaspider.webhooks.delivery import DELIVERY_JITTER, WebhookSender


def test_the_wait_doubles_per_attempt_up_to_the_cap_times_the_jitter():
    backoff = Backoff(base_s=10, cap_s=50, jitter=(0.5, 1.0))
    for attempt, wait in ((1, 10), (2, 20), (3, 40), (4, 50), (9, 50)):
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert all(wait * 0.5 <= d < wait for d in delays), (attempt, min(delays), max(delays))
        assert max(delays) - min(delays) > wait * 0.3  # spread, not one value
    assert Backoff(base_s=10, cap_s=50, jitter=(1.0, 1.0)).delay(0) == 10  # attempt 0 waits the base


def test_both_users_read_their_own_settings():
    settings = project_settings()
    assert task_backoff(settings) == Backoff(
        settings.getfloat("TASK_RETRY_BACKOFF_S"), settings.getfloat("TASK_RETRY_BACKOFF_MAX_S"), outcomes.TASK_JITTER
    )
    settings.set("ALERTS_BACKOFF_S", 7.0)
    assert WebhookSender.from_settings(settings).backoff == Backoff(
        7.0, settings.getfloat("ALERTS_BACKOFF_MAX_S"), DELIVERY_JITTER
    )
