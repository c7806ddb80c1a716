"""What the HTTP service refuses, and how it says so: writes without the bearer token, request bodies
over the cap, and 4xx answers that always encode.

Writes: reads are open; a write needs `Authorization: Bearer <CANNASPIDER_API_TOKEN>`; with no token
configured every write is refused. The token is compared in constant time and never logged or
echoed. The guard is an ASGI middleware (WriteGuard) that answers before anything reads the
request's body: a route's dependencies run only after FastAPI has read and parsed the whole body,
so an unauthenticated 200 MB upload would be held in memory first (docs/operations.md). The
dependency (require_token) stays on the write routes for their OpenAPI description (the bearer
scheme, the 401 and 403) and as a second check.

Bodies (BodyLimit, API_MAX_BODY_BYTES, every route): a declared Content-Length over the cap is a 413
before anything is read; a chunked body (no length to judge by) is counted as it is received and
refused once it passes the cap. No route needs more than a task's few hundred bytes.

Errors (HANDLERS): 422 answers that always encode: a request's own values echoed back in `detail` (pydantic's
`input` and `ctx`) may be what JSON cannot carry, a NaN or infinity (Python's JSON reader takes
them) or a lone surrogate (a valid JSON escape that is no UTF-8): FastAPI's own handler then fails
with a 500. Here they are echoed as their repr. Every 422 has the documented shape, a list of
{loc, msg, type}, the task roles' own refusals (TaskInputError) included. A task's target that is
well formed but names no store, keyword or state (TargetNotFound) is a 404 {detail, field}.

A 405 says in `Allow` every method the path answers, whichever of its routes the request came
closest to (Starlette names only the methods of the first route of that path: OPTIONS
/api/tasks said `Allow: POST`, though GET /api/tasks exists).
"""

from __future__ import annotations

import math
import secrets
from typing import Any

from fastapi import HTTPException, Request, Security
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


def _routed(scope: Scope) -> bool:
    return any(route.matches(scope)[0] is Match.FULL for route in scope["app"].router.routes)


bearer = HTTPBearer(auto_error=False, description="CANNASPIDER_API_TOKEN, required for writes")
READS = frozenset({"GET", "HEAD", "OPTIONS"})


def refusal(token: str | None, authorization: str | None) -> HTTPException | None:
    """Why a write with this Authorization header is refused, or None: it may go on."""
    if not token:
        return HTTPException(403, "writes are disabled: the server has no CANNASPIDER_API_TOKEN")
    scheme, credentials = get_authorization_scheme_param(authorization)
    given = credentials if scheme.lower() == "bearer" else ""
    if secrets.compare_digest(given.encode(), token.encode()):
        return None
    return HTTPException(
        401,
        "missing or wrong bearer token" if given else "this endpoint needs Authorization: Bearer <token>",
        headers={"WWW-Authenticate": "Bearer"},
    )


def require_token(request: Request, creds: HTTPAuthorizationCredentials | None = Security(bearer)) -> None:
    header = f"{creds.scheme} {creds.credentials}" if creds is not None else None
    refused = refusal(request.app.state.api_token, header)
    if refused is not None:
        raise refused


class WriteGuard:
    """Refuses a write (a route's method other than GET, HEAD, OPTIONS) without the token, from its
    headers alone: the body is never read. A path or method no route has stays a 404 or 405."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in READS and _routed(scope):
            refused = refusal(scope["app"].state.api_token, Headers(scope=scope).get("authorization"))
            if refused is not None:
                # the unread body stays on the connection: it is closed after this answer
                headers = {**(refused.headers or {}), "Connection": "close"}
                response = JSONResponse({"detail": refused.detail}, refused.status_code, headers=headers)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyTooLarge(HTTPException):
    def __init__(self, cap: int) -> None:
        # the rest of the body stays unread on the connection: it is closed after this answer
        headers = {"Connection": "close"}
        super().__init__(413, f"the request body is over {cap} bytes (API_MAX_BODY_BYTES)", headers=headers)


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.cap = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and (not declared.isascii() or not declared.isdigit() or int(declared) > self.cap):
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.cap:
                    raise BodyTooLarge(self.cap)  # FastAPI passes it on as is: a 413 (ExceptionMiddleware)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = BodyTooLarge(self.cap)
        response = JSONResponse({"detail": refused.detail}, refused.status_code, headers=refused.headers)
        await response(scope, receive, send)
