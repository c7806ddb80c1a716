"""A spider's `-a` arguments, parsed and validated once, by the field types of the role targets
(tasks/roles.py): `-a dispensary_id=3,1,2` names three stores as POST /api/tasks would name one.

    dispensary_id=N[,N…]   stores                       keyword_id=N[,N…]   keywords
    state=XX               a state (its stores, or the state store discovery searches)
    city=NAME              narrows store discovery      once=1              analytics_refresh: refresh once
    platform=NAME          the platform store discovery searches (default: cannaspider.platforms.DEFAULT)
    follow=1               drain the role's queue until stopped (SIGTERM/SIGINT)

Without a target the spider drains its role's queue (docs/operations.md), until the queue is
empty or, with follow=1, until it is stopped. Arguments starting with "_" belong to the process
runner (Scrapyd passes `-a _job=<id>`). A bad argument is a SpiderArgumentError: one line, which
the crawl command prints before exiting 2 (commands/crawl.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from cannaspider import platforms
from cannaspider.tasks.roles import DispensaryId, KeywordId, UsState, first_error

FLAG_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
FLAG_WORDS[""] = False
TARGETS = ("dispensary_id", "state", "keyword_id")  # what follow=1 cannot be combined with
_IDS = {"dispensary_id": TypeAdapter(DispensaryId), "keyword_id": TypeAdapter(KeywordId)}
_STATE = TypeAdapter(UsState)


class SpiderArgumentError(ValueError):
    """A bad `-a` argument. str() is the one line the crawl command prints (commands/crawl.py)."""


def parse_id_list(name: str, value: object) -> tuple[int, ...]:
    """`3, 1,2` → (3, 1, 2): each a positive id (the target's own field type), once each."""
    if value is None or value == "":
        return ()
    try:
        ids = tuple(dict.fromkeys(_IDS[name].validate_python(int(v)) for v in str(value).split(",") if v.strip()))
    except (ValueError, ValidationError):
        ids = ()
    if not ids:
        raise SpiderArgumentError(f"{name} must be a positive integer or a comma-separated list, got {value!r}")
    return ids


def parse_platform(value: object) -> str | None:
    if value in (None, ""):
        return None
    if str(value) not in platforms.names():
        raise SpiderArgumentError(f"unknown platform {value!r} (supported: {', '.join(platforms.names())})")
    return str(value)


def parse_flag(name: str, value: object) -> bool:
    text = str(value).strip().lower()
    if text not in FLAG_WORDS:
        raise SpiderArgumentError(f"{name} must be 1 or 0, got {value!r}")
    return FLAG_WORDS[text]


def parse_state(value: object) -> str | None:
    if value in (None, ""):
        return None
    try:
        return str(_STATE.validate_python(str(value)))
    except ValidationError as exc:
        raise SpiderArgumentError(first_error(exc)) from None


@dataclass(frozen=True)
class SpiderParams:
    """A spider's `-a` arguments (see the module docstring)."""

    dispensary_ids: tuple[int, ...] = ()
    state: str | None = None
    city: str | None = None
    follow: bool = False
    keyword_ids: tuple[int, ...] = ()
    once: bool = False  # analytics_refresh: its explicit unit, "refresh once" without a task
    platform: str | None = None  # store_discovery's explicit target: the platform searched

    @property
    def has_target(self) -> bool:
        return bool(self.dispensary_ids or self.state or self.keyword_ids)

    @classmethod
    def of_spider(
        cls, spider: str, accepted: frozenset[str], kwargs: Mapping[str, Any]
    ) -> tuple[SpiderParams, dict[str, Any]]:
        """A spider's keyword arguments split: its parsed `-a` arguments, and those it passes on
        to scrapy.Spider (the runner's `_…`, and `name`)."""
        passed = {k: v for k, v in kwargs.items() if k.startswith("_") or k == "name"}
        return cls.parse(spider, accepted, {k: v for k, v in kwargs.items() if k not in passed}), passed

    @classmethod
    def parse(cls, spider: str, accepted: frozenset[str], raw: Mapping[str, Any]) -> SpiderParams:
        """The arguments `raw` (those of `accepted`, and follow) or SpiderArgumentError."""
        accepted = accepted | {"follow"}
        unknown = sorted(k for k in raw if k not in accepted and not k.startswith("_"))
        if unknown:
            raise SpiderArgumentError(
                f"{spider}: unknown argument {', '.join(unknown)} (accepted: {', '.join(sorted(accepted))})"
            )
        try:
            params = cls(
                dispensary_ids=parse_id_list("dispensary_id", raw.get("dispensary_id")),
                state=parse_state(raw.get("state")),
                city=str(raw["city"]).strip() if raw.get("city") not in (None, "") else None,
                follow=parse_flag("follow", raw.get("follow", "")),
                keyword_ids=parse_id_list("keyword_id", raw.get("keyword_id")),
                once=parse_flag("once", raw.get("once", "")),
                platform=parse_platform(raw.get("platform")),
            )
        except SpiderArgumentError as exc:
            raise SpiderArgumentError(f"{spider}: {exc}") from None
        if params.follow and params.has_target:
            targets = " or ".join(t for t in TARGETS if t in accepted)
            raise SpiderArgumentError(f"{spider}: follow=1 drains the queue: give it no {targets}")
        return params
