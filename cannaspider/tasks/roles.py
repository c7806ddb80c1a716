"""The registry of worker roles: what each role's task targets, how often it is scheduled, what
it chains to. The queue, the schedule, the commands and the HTTP service all read this one table
(docs/architecture.md, "Task queue").

A task's target lives in two places: a store in `worker_tasks.dispensary_id` (the queue's
one-running-task-per-store rule and the foreign key need the column), anything else in `payload`
(`{"state": "AZ"}`, `{"keyword_id": 7}`). `Role.target()` builds both from user input and is the
only place that validates them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import us


class TaskInputError(ValueError):
    """Bad input for a task (unknown role, missing or extra target). str() is one line."""


class Needs(enum.Enum):
    STORE = "dispensary_id"
    STATE = "state"
    KEYWORD = "keyword_id"
    NOTHING = "nothing"


@dataclass(frozen=True)
class Role:
    name: str
    title: str
    description: str
    needs: Needs
    # How often the schedule creates it ("on-demand": never; see tasks/schedule.py for the settings)
    frequency: str
    # The spider that drains this role's queue (same name as the role)
    spider: str
    # The role of the follow-up tasks its completion creates (at CHAINED_PRIORITY; queue.CHAIN_SQL)
    chains_to: str | None = None

    def target(
        self, *, dispensary_id: int | None = None, state: str | None = None, keyword_id: int | None = None
    ) -> tuple[int | None, dict]:
        """(dispensary_id, payload) for a task of this role; TaskInputError when the input does not fit."""
        given = {
            name: value
            for name, value in (("dispensary_id", dispensary_id), ("state", state), ("keyword_id", keyword_id))
            if value is not None
        }
        wanted = self.needs.value
        extra = sorted(set(given) - {wanted})
        if extra:
            what = "no target" if self.needs is Needs.NOTHING else f"only {wanted}"
            raise TaskInputError(f"{self.name} takes {what}, not {', '.join(extra)}")
        if self.needs is Needs.NOTHING:
            return None, {}
        if wanted not in given:
            raise TaskInputError(f"{self.name} needs {wanted}")
        if self.needs is Needs.STATE:
            found = us.states.lookup(str(state).strip()) if str(state).strip() else None
            if found is None:
                raise TaskInputError(f"unknown US state {state!r} (use a code like AZ)")
            return None, {"state": found.abbr}
        value = given[wanted]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise TaskInputError(f"{wanted} must be a positive integer, got {value!r}")
        if self.needs is Needs.STORE:
            return value, {}
        return None, {"keyword_id": value}

    def as_dict(self) -> dict:
        return {
            "role": self.name,
            "name": self.title,
            "description": self.description,
            "needs": self.needs.value,
            "frequency": self.frequency,
            "spider": self.spider,
            "chains_to": self.chains_to,
        }


CHAINED_PRIORITY = 10  # seed "Priority Levels": on-demand and chained tasks
SCHEDULED_PRIORITY = 0  # scheduled/batch tasks
ON_DEMAND_PRIORITY = 10  # default of `scrapy enqueue` and POST /api/tasks

ROLES: dict[str, Role] = {
    role.name: role
    for role in (
        Role(
            "store_discovery",
            "Store Discovery",
            "Discover new dispensary locations in a state",
            Needs.STATE,
            "daily",
            "store_discovery",
            chains_to="entry_point_discovery",
        ),
        Role(
            "entry_point_discovery",
            "Entry Point Discovery",
            "Resolve a store's platform id from its menu URL",
            Needs.STORE,
            "on-demand",
            "entry_point_discovery",
            chains_to="product_discovery",
        ),
        Role(
            "product_discovery",
            "Product Discovery",
            "First product crawl of a new store (it then joins the resync schedule)",
            Needs.STORE,
            "on-demand",
            "product_discovery",
        ),
        Role(
            "product_resync",
            "Product Resync",
            "Re-crawl a store's products for price and stock changes",
            Needs.STORE,
            "every 4 hours",
            "product_resync",
        ),
        Role(
            "analytics_refresh",
            "Analytics Refresh",
            "Refresh the analytics materialized views",
            Needs.NOTHING,
            "daily",
            "analytics_refresh",
        ),
        Role(
            "crawl_onpage",
            "On-page Crawl",
            "Crawl a keyword's SERP competitor pages through Firecrawl",
            Needs.KEYWORD,
            "on-demand",
            "crawl_onpage",
        ),
    )
}

ROLE_NAMES: tuple[str, ...] = tuple(ROLES)


# The crawl platforms a task may name (the seed's task payload carries `platform`); only Dutchie's
# spiders exist so far.
PLATFORMS: tuple[str, ...] = ("dutchie",)


def platform(name: str) -> str:
    if name not in PLATFORMS:
        raise TaskInputError(f"unknown platform {name!r} (supported: {', '.join(PLATFORMS)})")
    return name


def get(name: str) -> Role:
    try:
        return ROLES[name]
    except KeyError:
        raise TaskInputError(f"unknown role {name!r} (roles: {', '.join(ROLE_NAMES)})") from None
