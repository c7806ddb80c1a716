"""The worker roles, declared here as data, beneath the queue that owns them (docs/architecture.md,
"Roles"; docs/operations.md, "Adding a role").

`ROLES` is the table: one `Role` per kind of work, with its title and description, its target as
one pydantic model (a `Target`), how often the schedule creates it (a `Schedule`), what its
completion chains to (a `Chain`: the child role, and the statement that selects its tasks) and,
for a role that is another's first run, that role (`first_of`: product_discovery is a store's first
product_resync). The queue (enqueue, claim, chaining), the schedule, `scrapy enqueue`, `scrapy
tasks`, `scrapy schedule`, `/api/worker-registry/roles` and the OpenAPI schema of `POST /api/tasks`
all read this table and nothing else: none of them imports or loads a spider. A spider refers to
its role by name (`role = roles.get(name)`, its name the role's); tests/tasks/test_roles.py holds
the table and the spiders to one another.

The `Target` models (and the field types below, which `-a` arguments reuse: units/arguments.py)
are the only validators of a task's target. A task's target lives in two places: a store in
`worker_tasks.dispensary_id` (the queue's one-running-task-per-store rule and the foreign key need
the column), anything else in `payload` (`{"state": "AZ"}`, `{"keyword_id": 7}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import us
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from cannaspider import platforms

NOT_FOUND = "target_not_found"  # the pydantic error type of a target that names nothing (state_code)


class TaskInputError(ValueError):
    """Bad input for a task (unknown role, missing or extra target). str() is one line."""


class TargetNotFound(TaskInputError):
    """A well-formed target naming what does not exist: a store or keyword id without its row, a
    state no US state is called. The request was right in form (POST /api/tasks answers 404, not
    422: its schema cannot know which ids exist). `field` names the target field."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def state_code(value: str) -> str:
    """The two-letter code of a US state given by code or name; a `target_not_found` error otherwise
    (Role.target turns it into a TargetNotFound)."""
    found = us.states.lookup(value.strip()) if value.strip() else None
    if found is None:
        reason = f"unknown US state {value!r} (use a code like AZ or a name like Arizona)"
        raise PydanticCustomError(NOT_FOUND, "{reason}", {"reason": reason})
    return str(found.abbr)


def whole_number(value: object) -> object:
    """A JSON number without a fraction (`550.0`) as the int it is: JSON Schema's `integer` takes it,
    so the schema of POST /api/tasks does; anything else is left to the strict int check (a string,
    a bool, 5.5, NaN: refused)."""
    return int(value) if type(value) is float and value.is_integer() else value


WholeNumber = BeforeValidator(whole_number)

# The field types of every target: a role's Target model, the `-a` arguments (units/arguments.py)
# and the body of POST /api/tasks (web/models.py) validate with these, and nothing else.
DispensaryId = Annotated[int, Field(ge=1, strict=True, description="a store (dispensaries.id)"), WholeNumber]
KeywordId = Annotated[int, Field(ge=1, strict=True, description="a keyword (keywords.id)"), WholeNumber]
UsState = Annotated[
    str,
    Field(min_length=2, max_length=40, strict=True, description="US state code or name"),
    AfterValidator(state_code),
]
INTEGER_ERRORS = frozenset({"int_type", "int_parsing", "int_from_float", "greater_than_equal", "bool_type"})


class Target(BaseModel):
    """What one task of a role works on. Subclasses declare one field (or none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # the field stored in worker_tasks.dispensary_id rather than in the payload
    COLUMN: ClassVar[str] = "dispensary_id"

    @classmethod
    def needs(cls) -> str:
        """The field this target needs ("nothing" for none): the registry's `needs`."""
        return next(iter(cls.model_fields), "nothing")

    def column(self) -> int | None:
        """The value of worker_tasks.dispensary_id (None: the target is all in the payload)."""
        value = getattr(self, self.COLUMN, None)
        return value if isinstance(value, int) else None

    def payload(self) -> dict[str, Any]:
        return self.model_dump(exclude={self.COLUMN})


class StoreTarget(Target):
    dispensary_id: DispensaryId


class StateTarget(Target):
    state: UsState


class KeywordTarget(Target):
    keyword_id: KeywordId


class NoTarget(Target):
    pass


def first_error(exc: ValidationError) -> str:
    """A validation error as the one line a user reads (the first problem found)."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "value"
    if error["type"] == NOT_FOUND:
        return str(error["msg"])
    if error["type"] in INTEGER_ERRORS:
        return f"{field} must be a positive integer, got {error['input']!r}"
    return f"{field}: {error['msg']}"


@dataclass(frozen=True)
class Schedule:
    """How the schedule creates a role's tasks (cannaspider/tasks/schedule.py): every
    `every_setting` seconds, one task per enabled store (`stores`), per state of
    SCHEDULE_DISCOVERY_STATES (`states`), or one (`once`)."""

    label: str  # what /api/worker-registry/roles says ("every 4 hours")
    every_setting: str
    over: Literal["stores", "states", "once"]


@dataclass(frozen=True)
class Chain:
    """The follow-up tasks a role's completion creates (tasks/queue/outcomes.py runs `sql` in the
    transaction that completes the tasks): tasks of the role `to`, inserted by `sql` from the
    completed tasks' ids `%(ids)s`, with `%(child)s` (the role `to`) and `%(priority)s` (the
    chained priority) as parameters. The queue ends the statement with its duplicate-task rule
    (queue/model.py SKIP_DUPLICATE_TASK): an identical child already queued is left as it is."""

    to: str
    sql: str


@dataclass(frozen=True)
class Role:
    name: str
    title: str
    description: str
    target_model: type[Target]
    schedule: Schedule | None = None  # None: on demand (or chained) only
    chain: Chain | None = None  # None: its completion creates no task
    first_of: str | None = None  # the role whose work this is, done for the first time (same_work)

    @property
    def chains_to(self) -> str | None:
        """The role of the follow-up tasks its completion creates."""
        return self.chain.to if self.chain is not None else None

    @property
    def needs(self) -> str:
        return self.target_model.needs()

    @property
    def frequency(self) -> str:
        return self.schedule.label if self.schedule is not None else "on-demand"

    def target(self, **given: object) -> tuple[int | None, dict[str, Any]]:
        """(dispensary_id, payload) for a task of this role; TaskInputError when the input does not
        fit, TargetNotFound when it fits but names no state (the ids' rows: tasks/queue/enqueuing.py)."""
        given = {name: value for name, value in given.items() if value is not None}
        wanted = set(self.target_model.model_fields)
        extra = sorted(set(given) - wanted)
        if extra:
            what = f"only {', '.join(sorted(wanted))}" if wanted else "no target"
            raise TaskInputError(f"{self.name} takes {what}, not {', '.join(extra)}")
        missing = sorted(wanted - set(given))
        if missing:
            raise TaskInputError(f"{self.name} needs {', '.join(missing)}")
        try:
            target = self.target_model.model_validate(given)
        except ValidationError as exc:
            error = exc.errors()[0]
            if error["type"] == NOT_FOUND:
                raise TargetNotFound(str(error["loc"][0]), first_error(exc)) from None
            raise TaskInputError(first_error(exc)) from None
        return target.column(), target.payload()

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.name,
            "name": self.title,
            "description": self.description,
            "needs": self.needs,
            "frequency": self.frequency,
            "spider": self.name,
            "chains_to": self.chains_to,
        }


# -- the table ------------------------------------------------------------------------------------

CHAINED_PRIORITY = 10  # seed "Priority Levels": on-demand and chained tasks
SCHEDULED_PRIORITY = 0  # scheduled/batch tasks
ON_DEMAND_PRIORITY = 10  # default of `scrapy enqueue` and POST /api/tasks

# The crawl platforms a task may name (the seed's task payload carries `platform`): the registered
# ones (cannaspider/platforms/, docs/platforms.md), whose stores the role spiders crawl alike.
PLATFORMS: tuple[str, ...] = platforms.names()

# store_discovery's chain: an entry_point_discovery task for each *new* store (those its result
# lists, or, for a task that recorded none, the state's stores created since it was queued)
ENTRY_POINT_TASK_PER_NEW_STORE = """
INSERT INTO worker_tasks (role, platform, dispensary_id, priority, parent_task_id)
SELECT DISTINCT ON (d.id) %(child)s, t.platform, d.id, %(priority)s, t.id
  FROM worker_tasks t
  JOIN dispensaries d ON CASE WHEN t.result ? 'new_dispensary_ids'
                              THEN d.id IN (SELECT jsonb_array_elements_text(t.result -> 'new_dispensary_ids')::bigint)
                              ELSE d.state = t.payload ->> 'state' AND d.created_at >= t.created_at END
 WHERE t.id = ANY(%(ids)s) AND d.crawl_enabled
"""

# entry_point_discovery's chain: a product_discovery task for its store, once the store is resolved
# (has its platform id) and enabled
PRODUCT_TASK_PER_RESOLVED_STORE = """
INSERT INTO worker_tasks (role, platform, dispensary_id, priority, parent_task_id)
SELECT %(child)s, t.platform, t.dispensary_id, %(priority)s, t.id
  FROM worker_tasks t JOIN dispensaries d ON d.id = t.dispensary_id
 WHERE t.id = ANY(%(ids)s) AND d.platform_dispensary_id IS NOT NULL AND d.crawl_enabled
"""


def registry(declared: list[Role]) -> dict[str, Role]:
    """The roles by name, in the order of the chain (a role before those it chains to); TypeError
    for a role declared twice or one that chains to (or is the first run of) an undeclared role."""
    by_name: dict[str, Role] = {}
    for role in declared:
        if role.name in by_name:
            raise TypeError(f"role {role.name!r} is declared twice")
        by_name[role.name] = role
    for role in by_name.values():
        if role.chains_to is not None and role.chains_to not in by_name:
            raise TypeError(f"role {role.name!r} chains to {role.chains_to!r}, which is not declared")
        if role.first_of is not None and role.first_of not in by_name:
            raise TypeError(f"role {role.name!r} is the first run of {role.first_of!r}, which is not declared")
    return {role.name: role for role in sorted(by_name.values(), key=lambda r: (-_depth(r, by_name), r.name))}


def _depth(role: Role, declared: dict[str, Role]) -> int:
    """How many roles follow this one in its chain (store_discovery: 2)."""
    depth = 0
    while role.chains_to is not None and depth < len(declared):
        role, depth = declared[role.chains_to], depth + 1
    return depth


# Every role, each done by the spider of its name (cannaspider/spiders/).
ROLES: dict[str, Role] = registry(
    [
        Role(
            "store_discovery",
            "Store Discovery",
            "Discover new dispensary locations in a state",
            StateTarget,
            schedule=Schedule("daily", "SCHEDULE_DISCOVERY_EVERY_S", "states"),
            chain=Chain("entry_point_discovery", ENTRY_POINT_TASK_PER_NEW_STORE),
        ),
        Role(
            "entry_point_discovery",
            "Entry Point Discovery",
            "Resolve a store's platform id from its menu URL",
            StoreTarget,
            chain=Chain("product_discovery", PRODUCT_TASK_PER_RESOLVED_STORE),
        ),
        Role(
            "product_discovery",
            "Product Discovery",
            "First product crawl of a new store (it then joins the resync schedule)",
            StoreTarget,
            first_of="product_resync",
        ),
        Role(
            "product_resync",
            "Product Resync",
            "Re-crawl a store's products for price and stock changes",
            StoreTarget,
            schedule=Schedule("every 4 hours", "SCHEDULE_RESYNC_EVERY_S", "stores"),
        ),
        Role(
            "crawl_onpage",
            "On-page Crawl",
            "Crawl a keyword's SERP competitor pages through Firecrawl",
            KeywordTarget,
        ),
        Role(
            "analytics_refresh",
            "Analytics Refresh",
            "Refresh the analytics materialized views",
            NoTarget,
            schedule=Schedule("daily", "SCHEDULE_ANALYTICS_EVERY_S", "once"),
        ),
    ]
)


def all_roles() -> dict[str, Role]:
    """Every role by name, in the order of the chain (a role before those it chains to)."""
    return ROLES


def same_work(name: str) -> tuple[str, ...]:
    """The role `name` and every role that is its first run (`first_of`): the same work on the same
    target (product_discovery is a store's first product_resync)."""
    return (name, *(other.name for other in ROLES.values() if other.first_of == name))


def target_fields() -> dict[str, FieldInfo]:
    """Every field a role's target may have (dispensary_id, state, keyword_id), as its Target
    model declares it: the options of `scrapy enqueue` and the body of POST /api/tasks."""
    fields: dict[str, FieldInfo] = {}
    for role in ROLES.values():
        for name, info in role.target_model.model_fields.items():
            fields.setdefault(name, info)
    return fields


def names() -> tuple[str, ...]:
    return tuple(ROLES)


def platform(name: str) -> str:
    if name not in PLATFORMS:
        raise TaskInputError(f"unknown platform {name!r} (supported: {', '.join(PLATFORMS)})")
    return name


def get(name: str) -> Role:
    try:
        return ROLES[name]
    except KeyError:
        raise TaskInputError(f"unknown role {name!r} (roles: {', '.join(names())})") from None
