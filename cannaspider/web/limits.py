"""The cap on request bodies (API_MAX_BODY_BYTES), for every route: a declared Content-Length
over it is a 413 before anything is read; a chunked body (no length to judge by) is counted as it
is received and refused once it passes the cap. No route needs more than a task's few hundred
bytes (docs/operations.md)."""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send


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
