"""Bearer-token guard of the HTTP service's writes. Reads are open; a write needs
`Authorization: Bearer <CANNASPIDER_API_TOKEN>`; with no token configured every write is refused.
The token is compared in constant time and never logged or echoed."""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

bearer = HTTPBearer(auto_error=False, description="CANNASPIDER_API_TOKEN, required for writes")


def require_token(request: Request, creds: HTTPAuthorizationCredentials | None = Security(bearer)) -> None:
    token: str | None = request.app.state.api_token
    if not token:
        raise HTTPException(403, "writes are disabled: the server has no CANNASPIDER_API_TOKEN")
    given = creds.credentials if creds is not None and creds.scheme.lower() == "bearer" else ""
    if not secrets.compare_digest(given.encode(), token.encode()):
        raise HTTPException(
            401,
            "missing or wrong bearer token" if given else "this endpoint needs Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
