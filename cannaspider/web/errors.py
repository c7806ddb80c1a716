"""422 answers that always encode: a request's own values echoed back in `detail` (pydantic's
`input` and `ctx`) may be what JSON cannot carry, a NaN or infinity (Python's JSON reader takes
them) or a lone surrogate (a valid JSON escape that is no UTF-8): FastAPI's own handler then fails
with a 500. Here they are echoed as their repr. Every 422 has the documented shape, a list of
{loc, msg, type}, the task roles' own refusals (TaskInputError) included. A task's target that is
well formed but names no store, keyword or state (TargetNotFound) is a 404 {detail, field}.

A 405 says in `Allow` every method the path answers, whichever of its routes the request came
closest to (Starlette names only the methods of the first route of that path: OPTIONS
/api/tasks said `Allow: POST`, though GET /api/tasks exists)."""

from __future__ import annotations

import math
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from cannaspider.tasks.roles import TargetNotFound, TaskInputError


def json_safe(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isascii() or _encodes(value) else value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": json_safe(jsonable_encoder(exc.errors()))}, status_code=422)


async def task_input_error(request: Request, exc: Exception) -> JSONResponse:
    detail = [{"loc": ["body"], "msg": str(exc), "type": "task_input"}]
    return JSONResponse({"detail": json_safe(detail)}, status_code=422)


async def target_not_found(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TargetNotFound)
    return JSONResponse(json_safe({"detail": str(exc), "field": exc.field}), status_code=404)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        methods = {
            method
            for route in request.app.router.routes
            if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE
            for method in route.methods or ()
        }
        exc = StarletteHTTPException(
            405, exc.detail, headers={**(exc.headers or {}), "Allow": ", ".join(sorted(methods))}
        )
    return await http_exception_handler(request, exc)


HANDLERS = {
    RequestValidationError: validation_error,
    TaskInputError: task_input_error,
    TargetNotFound: target_not_found,  # a TaskInputError: Starlette picks the handler of the closest class
    StarletteHTTPException: http_error,
}
