"""A role, declared once on its spider (docs/operations.md, "Adding a role").

A spider names its role with a class attribute `role = Role(...)`: its title and description,
its target as one pydantic model (a `Target`), how often the schedule creates it and what its
completion chains to (a `Chain`: the child role, and the statement that queues its tasks). The
registry (cannaspider/tasks/roles.py), `/api/worker-registry/roles`, the OpenAPI schema of
`POST /api/tasks`, `scrapy enqueue`, the schedule and the chaining all read these declarations;
the `Target` models (and the field types below, which `-a` arguments reuse) are the only
validators of a task's target.

A task's target lives in two places: a store in `worker_tasks.dispensary_id` (the queue's
one-running-task-per-store rule and the foreign key need the column), anything else in `payload`
(`{"state": "AZ"}`, `{"keyword_id": 7}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import us
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

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
    chained priority) as parameters; an identical child already queued is left as it is."""

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
