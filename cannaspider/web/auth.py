"""Bearer-token guard of the HTTP service's writes. Reads are open; a write needs
`Authorization: Bearer <CANNASPIDER_API_TOKEN>`; with no token configured every write is refused.
The token is compared in constant time and never logged or echoed.

The guard is an ASGI middleware (WriteGuard) that answers before anything reads the request's
body: a route's dependencies run only after FastAPI has read and parsed the whole body, so an
unauthenticated 200 MB upload would be held in memory first (docs/operations.md). The dependency
(require_token) stays on the write routes for their OpenAPI description (the bearer scheme, the
401 and 403) and as a second check."""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send


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
