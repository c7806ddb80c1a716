"""Every environment variable cannaspider reads, in one place.

Settings, commands and the database layer all ask this module, so a variable has one name and
one line of documentation (README's configuration table is checked against ENV_VARS and the
defaults in settings.py by tests/test_env.py).

One precedence rule: the command line (`-s NAME=value`) > the environment > settings.py.
settings.py applies the environment once (overrides(), at the project's priority, below the
command line's); code that holds Scrapy settings reads them with configured(), which falls back
to the environment only for settings built without the project (tests' get_crawler, or none).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs
from scrapy.settings import BaseSettings
from scrapy.utils.conf import closest_scrapy_cfg


@dataclass(frozen=True)
class EnvVar:
    name: str
    setting: str | None
    help: str


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar(
        "DATABASE_URL", "DATABASE_URL", "PostgreSQL URL. Unset: an embedded server under CANNASPIDER_DATA_DIR/postgres."
    ),
    EnvVar(
        "CANNASPIDER_DATA_DIR",
        "CANNASPIDER_DATA_DIR",
        "Folder for local state (embedded PostgreSQL, feeds, images). Default: ./.data "
        "beside scrapy.cfg, or the user data folder when run from an egg (Scrapyd).",
    ),
    EnvVar("DUTCHIE_GRAPHQL_URL", "DUTCHIE_GRAPHQL_URL", "Dutchie GraphQL endpoint."),
    EnvVar(
        "DUTCHIE_PERSISTED_HASHES",
        "DUTCHIE_PERSISTED_HASHES",
        "JSON object {operationName: sha256} overriding the persisted-query hashes.",
    ),
    EnvVar("DUTCHIE_PER_PAGE", "DUTCHIE_PER_PAGE", "Products per FilteredProducts page."),
    EnvVar("JANE_ALGOLIA_URL", "JANE_ALGOLIA_URL", "Base URL of Jane's Algolia host."),
    EnvVar("JANE_ALGOLIA_APP_ID", "JANE_ALGOLIA_APP_ID", "Algolia application id of Jane's indexes."),
    EnvVar("JANE_ALGOLIA_API_KEY", "JANE_ALGOLIA_API_KEY", "Algolia search-only key Jane's front end ships."),
    EnvVar("JANE_PRODUCTS_INDEX", "JANE_PRODUCTS_INDEX", "Algolia index of Jane's menu products."),
    EnvVar("JANE_STORES_INDEX", "JANE_STORES_INDEX", "Algolia index of Jane's stores."),
    EnvVar("CHROMIUM_PATH", "CHROMIUM_PATH", "Chromium used by scrapy-playwright."),
    EnvVar("FIRECRAWL_API_URL", "FIRECRAWL_API_URL", "Base URL of the self-hosted Firecrawl."),
    EnvVar("FIRECRAWL_API_KEY", "FIRECRAWL_API_KEY", "Bearer key for Firecrawl (secret)."),
    EnvVar(
        "CANNASPIDER_FEED_DIR",
        "CANNASPIDER_FEED_DIR",
        "Where the default JSON-lines feeds go. Default: DATA_DIR/feeds.",
    ),
    EnvVar(
        "CANNASPIDER_MIGRATIONS_DIR",
        "CANNASPIDER_MIGRATIONS_DIR",
        "Folder of the migrations/NNN_name.sql files. Default: migrations/ beside scrapy.cfg.",
    ),
    EnvVar("CANNASPIDER_LOG_LEVEL", "LOG_LEVEL", "Scrapy log level."),
    EnvVar("CANNASPIDER_CONCURRENCY", "CONCURRENT_REQUESTS", "Concurrent requests per process."),
    EnvVar("CANNASPIDER_API_TOKEN", "CANNASPIDER_API_TOKEN", "Bearer token for the HTTP service's writes (secret)."),
    EnvVar("ALERT_WEBHOOK_URL", "ALERT_WEBHOOK_URL", "Slack-compatible webhook for crawl-health alerts (secret)."),
    EnvVar(
        "CANNASPIDER_ALERTS_SECRET",
        "ALERTS_WEBHOOK_SECRET",
        "HMAC-SHA256 key that signs event alerts' webhooks (secret).",
    ),
    EnvVar(
        "CANNASPIDER_HISTORY_ARCHIVE_STORE",
        "HISTORY_ARCHIVE_STORE",
        "Folder (or file:// URI) the history's cold months go to as Parquet.",
    ),
    EnvVar(
        "CANNASPIDER_HISTORY_ARCHIVE_AFTER_MONTHS",
        "HISTORY_ARCHIVE_AFTER_MONTHS",
        "Full months of snapshots kept in PostgreSQL before `scrapy history archive` moves a month.",
    ),
)


def project_root() -> Path | None:
    """The folder of the nearest scrapy.cfg (a checkout); None when running from an egg (Scrapyd)."""
    cfg = closest_scrapy_cfg()
    return Path(cfg).resolve().parent if cfg else None


def data_dir() -> Path:
    raw = os.environ.get("CANNASPIDER_DATA_DIR")
    if raw:
        return Path(raw).expanduser().resolve()
    root = project_root()
    return root / ".data" if root else Path(platformdirs.user_data_dir("cannaspider"))


def scrapyd_credentials() -> tuple[str | None, str | None]:
    """SCRAPYD_USERNAME / SCRAPYD_PASSWORD: Scrapyd's own variables (README's table), which
    `scrapy schedule --scrapyd` also uses to call the nodes. Never logged."""
    return os.environ.get("SCRAPYD_USERNAME") or None, os.environ.get("SCRAPYD_PASSWORD") or None


def scrapy_check() -> bool:
    """SCRAPY_CHECK: Scrapy's own variable, set while `scrapy check` runs its spiders (Scrapy's
    documented way to detect a contract check). Read here only, by the add-on that turns it into
    the CONTRACT_MODE setting (cannaspider/contracts.py); components read the setting."""
    return bool(os.environ.get("SCRAPY_CHECK"))


def configured(settings: BaseSettings | None, name: str) -> str | None:
    """The value of setting `name` under the precedence rule above (None when unset)."""
    value = settings.get(name) if settings is not None else None
    if value not in (None, ""):
        return str(value)
    for var in ENV_VARS:
        if var.setting == name:
            return os.environ.get(var.name) or None
    return None


def overrides() -> dict[str, object]:
    """Settings overridden by environment variables that are set (and only those)."""
    out: dict[str, object] = {}
    for var in ENV_VARS:
        value = os.environ.get(var.name)
        if value not in (None, "") and var.setting:
            out[var.setting] = value
    out.setdefault("CANNASPIDER_DATA_DIR", str(data_dir()))
    return out
