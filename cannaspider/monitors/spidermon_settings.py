"""The SPIDERMON_* settings this project acts on, and the refusal of any other (docs/health.md,
"Spidermon's settings").

The crawl-health suite runs through its own extension (extension.py), not Spidermon's: Spidermon's
other settings (SPIDERMON_SLACK_*, SPIDERMON_PERIODIC_MONITORS, SPIDERMON_MAX_ERRORS, …) would be
accepted and do nothing, and an operator who set one would believe it acted. A crawl given one does
not start: one `error:` line naming it and what to use instead, exit 2 (commands/crawl.py).
"""

from __future__ import annotations

from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings

HONOURED = {
    "SPIDERMON_ENABLED": "turns the crawl-health suite on or off",
    "SPIDERMON_SPIDER_CLOSE_MONITORS": "the suites run at spider close and every HEALTH_CHECK_PERIOD_S",
}
# what an operator reaching for one of Spidermon's own settings wants here instead
INSTEAD = (
    ("SPIDERMON_PERIODIC_MONITORS", "HEALTH_CHECK_PERIOD_S"),
    ("SPIDERMON_SLACK_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_TELEGRAM_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_DISCORD_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_EMAIL_", "ALERT_WEBHOOK_URL"),
    ("SPIDERMON_MAX_ERRORS", "HEALTH_MAX_ERRORS"),
    ("SPIDERMON_MAX_CRITICALS", "HEALTH_MAX_ERRORS"),
    ("SPIDERMON_EXPECTED_FINISH_REASONS", "HEALTH_OK_FINISH_REASONS"),
)


class UnsupportedSpidermonSetting(UsageError):
    """A SPIDERMON_* setting the project's suite does not act on (a usage error: exit 2)."""


def refuse_unsupported(settings: BaseSettings) -> None:
    """Raise UnsupportedSpidermonSetting if a SPIDERMON_* setting other than HONOURED is set."""
    unsupported = sorted(name for name in settings if name.startswith("SPIDERMON_") and name not in HONOURED)
    if not unsupported:
        return
    hints = [f"{name} → {other}" for name in unsupported for prefix, other in INSTEAD if name.startswith(prefix)]
    raise UnsupportedSpidermonSetting(
        f"{', '.join(unsupported)}: not acted on by this project's crawl health (it honours only "
        f"{' and '.join(HONOURED)}; docs/health.md)" + (f"; use instead: {'; '.join(hints)}" if hints else "")
    )
