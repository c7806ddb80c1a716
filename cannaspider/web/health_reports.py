"""The crawl-health reports the monitors wrote (cannaspider/monitors/health_notify.py): the newest per
spider, and the blocks of the last 24 hours, read from HEALTH_REPORT_DIR. A report that cannot be
read is skipped (a crawl may be writing it right now)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, Any] | None:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def latest(reports_dir: Path) -> list[dict[str, Any]]:
    """The newest report of each spider, by spider name. File names start with a UTC timestamp."""
    out: list[dict[str, Any]] = []
    if not reports_dir.is_dir():
        return out
    for folder in sorted(p for p in reports_dir.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.json"), reverse=True):
            report = _read(path)
            if report is not None:
                out.append(report)
                break
    return out


def blocks_since(reports_dir: Path, hours: float = 24) -> int:
    """Blocks counted by the crawls that finished in the last `hours`."""
    if not reports_dir.is_dir():
        return 0
    cutoff = (datetime.now(UTC) - timedelta(hours=hours)).strftime("%Y%m%dT%H%M%S")
    total = 0
    for path in reports_dir.glob("*/*.json"):
        if path.name[:15] < cutoff:
            continue
        report = _read(path)
        if report is not None:
            total += sum(v for v in (report.get("blocks_per_proxy") or {}).values() if isinstance(v, int))
    return total
