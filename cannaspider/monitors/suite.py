"""The crawl-health suite Spidermon runs when a spider closes (settings: SPIDERMON_SPIDER_CLOSE_MONITORS).
Its one action writes the report and raises the alert (alerts.py)."""

from __future__ import annotations

from spidermon import MonitorSuite

from cannaspider.monitors.alerts import HealthReportAction
from cannaspider.monitors.blocks import BlocksPerProxyMonitor, StaleHashMonitor
from cannaspider.monitors.finish import ErrorCountMonitor, FinishReasonMonitor
from cannaspider.monitors.images import ImageFailuresMonitor
from cannaspider.monitors.stores import StoreCrawlsMonitor
from cannaspider.monitors.validation import ItemValidationMonitor


class CrawlHealthSuite(MonitorSuite):  # type: ignore[misc]  # Spidermon is untyped
    monitors = [
        FinishReasonMonitor,
        ErrorCountMonitor,
        StoreCrawlsMonitor,
        BlocksPerProxyMonitor,
        StaleHashMonitor,
        ItemValidationMonitor,
        ImageFailuresMonitor,
    ]
    monitors_finished_actions = [HealthReportAction]
