"""The menu platforms: the registry of those a crawl can name (`dispensaries.platform`,
`worker_tasks.platform`), each one package implementing cannaspider/platforms/interface.py
(docs/platforms.md). Outside this package, code reaches a platform only through `get` or `build`
and the interface (tests/platforms/test_boundary.py); `geography.py` is what any platform's area
search shares.

A platform's module is imported when it is first asked for, so naming the platforms (the queue's
and the HTTP API's validation) loads none of them."""

from __future__ import annotations

import functools
import importlib

from scrapy.settings import BaseSettings

from cannaspider.platforms.interface import Platform

# name → "module:class"; the name is what dispensaries.platform and worker_tasks.platform hold
REGISTERED: dict[str, str] = {
    "dutchie": "cannaspider.platforms.dutchie.platform:DutchiePlatform",
    "jane": "cannaspider.platforms.jane.platform:JanePlatform",
}
# what a store or task names when nothing else is said (the columns' default, migrations/001, 003)
DEFAULT = "dutchie"


class UnknownPlatform(KeyError):
    """A platform name no package implements."""


def names() -> tuple[str, ...]:
    """The registered platforms, in registration order."""
    return tuple(REGISTERED)


@functools.cache
def get(name: str) -> type[Platform]:
    """The platform class registered as `name` (its module imported on first use)."""
    try:
        path = REGISTERED[name]
    except KeyError:
        raise UnknownPlatform(f"unknown platform {name!r} (registered: {', '.join(REGISTERED)})") from None
    module, _, attr = path.partition(":")
    cls: type[Platform] = getattr(importlib.import_module(module), attr)
    return cls


def build(name: str, settings: BaseSettings) -> Platform:
    """The platform `name` configured from `settings` (its URLs, page sizes, persisted queries)."""
    return get(name).from_settings(settings)
