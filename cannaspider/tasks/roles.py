"""The registry of worker roles, built from the spiders' declarations: every spider of
SPIDER_MODULES that declares a `role` (a units.role.Role) is one. The queue, the schedule, the
commands and the HTTP service read this registry; nothing else lists the roles
(docs/operations.md, "Adding a role").

The spiders are found as `scrapy list` finds them (Scrapy's SpiderLoader), on the first use of
the registry rather than when this module is imported: the spiders themselves use the queue,
which uses this module.
"""

from __future__ import annotations

import functools

from pydantic.fields import FieldInfo
from scrapy.settings import Settings
from scrapy.spiderloader import SpiderLoader

from cannaspider import platforms
from cannaspider.settings import SPIDER_MODULES
from cannaspider.units.role import Role, TargetNotFound, TaskInputError

__all__ = ["Role", "TargetNotFound", "TaskInputError", "all_roles", "get", "names", "platform", "target_fields"]

CHAINED_PRIORITY = 10  # seed "Priority Levels": on-demand and chained tasks
SCHEDULED_PRIORITY = 0  # scheduled/batch tasks
ON_DEMAND_PRIORITY = 10  # default of `scrapy enqueue` and POST /api/tasks

# The crawl platforms a task may name (the seed's task payload carries `platform`): the registered
# ones (cannaspider/platforms/, docs/platforms.md), whose stores the role spiders crawl alike.
PLATFORMS: tuple[str, ...] = platforms.names()


@functools.cache
def _spiders() -> dict[str, type]:
    loader = SpiderLoader(Settings({"SPIDER_MODULES": SPIDER_MODULES}))
    return {name: loader.load(name) for name in loader.list()}


def same_work(name: str) -> tuple[str, ...]:
    """The role `name` and every role whose spider is a kind of its spider (a subclass): the same
    work on the same target (product_discovery is a store's first product_resync)."""
    spiders = _spiders()
    return tuple(other for other in all_roles() if issubclass(spiders[other], spiders[name]))


@functools.cache
def all_roles() -> dict[str, Role]:
    """Every declared role by name, in the order of the chain (a role before those it chains to)."""
    declared: dict[str, Role] = {}
    for name, spider in _spiders().items():
        role = getattr(spider, "role", None)
        if isinstance(role, Role):
            if role.name != name:
                raise TypeError(f"spider {name!r} declares the role {role.name!r}: a role's spider has its name")
            declared[name] = role
    for role in declared.values():
        if role.chains_to is not None and role.chains_to not in declared:
            raise TypeError(f"role {role.name!r} chains to {role.chains_to!r}, which no spider declares")
    return {role.name: role for role in sorted(declared.values(), key=lambda r: (-_depth(r, declared), r.name))}


def _depth(role: Role, declared: dict[str, Role]) -> int:
    """How many roles follow this one in its chain (store_discovery: 2)."""
    depth = 0
    while role.chains_to is not None and depth < len(declared):
        role, depth = declared[role.chains_to], depth + 1
    return depth


def target_fields() -> dict[str, FieldInfo]:
    """Every field a role's target may have (dispensary_id, state, keyword_id), as its Target
    model declares it: the options of `scrapy enqueue` and the body of POST /api/tasks."""
    fields: dict[str, FieldInfo] = {}
    for role in all_roles().values():
        for name, info in role.target_model.model_fields.items():
            fields.setdefault(name, info)
    return fields


def names() -> tuple[str, ...]:
    return tuple(all_roles())


def platform(name: str) -> str:
    if name not in PLATFORMS:
        raise TaskInputError(f"unknown platform {name!r} (supported: {', '.join(PLATFORMS)})")
    return name


def get(name: str) -> Role:
    try:
        return all_roles()[name]
    except KeyError:
        raise TaskInputError(f"unknown role {name!r} (roles: {', '.join(names())})") from None
