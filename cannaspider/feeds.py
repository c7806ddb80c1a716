"""Feed URI parameters: adds %(date)s (UTC, YYYY-MM-DD) so default feeds land in dated folders."""

from __future__ import annotations

from datetime import UTC, datetime


def uri_params(params: dict, spider) -> dict:
    return {**params, "date": datetime.now(UTC).strftime("%Y-%m-%d")}
