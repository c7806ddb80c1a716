"""Request and response bodies of the HTTP service (they make its OpenAPI description).

A task and a page of tasks are the queue's own dataclasses (Task, TaskPage), not copies: pydantic
validates and describes them as it does these models.
"""

from __future__ import annotations

import enum
import functools
import operator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator
from pydantic.fields import FieldInfo

from cannaspider.tasks import roles
from cannaspider.tasks.queue import DEFAULT_MAX_ATTEMPTS, Task
from cannaspider.tasks.roles import WholeNumber

# Text parameters (query and path) take no NUL: PostgreSQL's text refuses it, so it is a 422 here,
# and the schema says so (/openapi.json)
NO_NUL = r"^[^\x00]*$"

RoleName = enum.Enum("RoleName", {name: name for name in roles.names()}, type=str)  # type: ignore[misc]
Platform = Literal[roles.PLATFORMS]  # type: ignore[valid-type]  # an enum in the schema; others: 422 listing them


class ErrorOut(BaseModel):
    """A refusal: what is wrong with the request, or what is missing."""

    detail: str


TARGET_NOT_FOUND = "the target is well formed but names no store, keyword or US state: nothing is queued"


class TargetNotFoundOut(ErrorOut):
    """TargetNotFound: the task's target is well formed but names no store, keyword or US state."""

    field: Literal["dispensary_id", "state", "keyword_id"] = Field(description="the target field that names nothing")


def refused_with(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route that may answer these statuses with an ErrorOut."""
    return {status: {"model": ErrorOut, "description": REFUSALS[status]} for status in statuses}


REFUSALS = {
    400: "a bad parameter, or a body that is not UTF-8 JSON",
    401: "no bearer token, or a wrong one",
    403: "writes are disabled: the server has no CANNASPIDER_API_TOKEN",
    404: "not found",
    413: "the request body is over API_MAX_BODY_BYTES",
    429: "more renders at once from this client than IMG_RENDERS_PER_CLIENT: try again after Retry-After",
    500: "the stored image cannot be read",
    501: "the image store's scheme is not supported by this server",
    502: "the stored image cannot be rendered, or the image store refused us",
    503: "the database (or the image store) is unavailable: try again later",
}


class RoleOut(BaseModel):
    role: str
    name: str
    description: str
    needs: Literal["dispensary_id", "state", "keyword_id", "nothing"]
    frequency: str
    spider: str
    chains_to: str | None


class TaskInBase(BaseModel):
    """An on-demand task: its role and the one target the role needs (GET /api/worker-registry/roles)."""

    model_config = ConfigDict(extra="forbid")  # an unknown field is a mistake, not something to ignore

    role: str
    platform: Platform = Field(roles.PLATFORMS[0], description="the crawl platform")
    priority: Annotated[int, WholeNumber] = Field(
        roles.ON_DEMAND_PRIORITY, ge=-1000, le=1000, strict=True, description="higher runs first"
    )
    max_attempts: Annotated[int, WholeNumber] = Field(DEFAULT_MAX_ATTEMPTS, ge=1, le=50, strict=True)

    @field_validator("platform", mode="before")
    @classmethod
    def supported_platform(cls, value: object) -> object:
        if type(value) is str:
            roles.platform(value)  # the same reason as `scrapy enqueue --platform` gives
        return value

    def target(self) -> dict[str, Any]:
        """The target fields of its role, as given (queue.enqueue resolves them)."""
        return {name: getattr(self, name) for name in roles.target_fields() if name in type(self).model_fields}


def _shape(info: FieldInfo) -> Any:
    """A target field as the body takes it: its type and bounds, not its resolution. Which states,
    stores and keywords exist is no rule of the schema: one that names nothing is well formed, and
    the queue answers it with TargetNotFound (a 404), where a state's name becomes its code."""
    bounds = [m for m in info.metadata if not isinstance(m, AfterValidator)]
    return Annotated[info.annotation, *bounds, Field(description=info.description)]


def _task_in(role: roles.Role) -> type[TaskInBase]:
    """The body of one role's task: `role` its name, its target's fields required, no other target."""
    return create_model(  # type: ignore[call-overload,no-any-return]
        "".join(part.title() for part in role.name.split("_")) + "TaskIn",
        __base__=TaskInBase,
        __doc__=f"{role.title}: a task of `{role.name}`, which needs {role.needs}.",
        role=(Literal[role.name], ...),
        **{name: (_shape(info), ...) for name, info in role.target_model.model_fields.items()},
    )


# The body of POST /api/tasks: one model per role, told apart by `role` (a `oneOf` with a
# discriminator in /openapi.json), so that a body the schema accepts has exactly the target its
# role needs: the handler refuses nothing the schema allows, but a target that does not exist (404).
if TYPE_CHECKING:
    TaskIn = TaskInBase
else:
    TaskIn = Annotated[
        functools.reduce(operator.or_, (_task_in(role) for role in roles.all_roles().values())),  # A | B | …
        Field(discriminator="role"),
    ]


class EnqueueOut(BaseModel):
    task: Task  # the queue's own dataclass (cannaspider/tasks/queue/model.py): one definition
    reused: bool = Field(description="true: an identical pending or running task was reused")
