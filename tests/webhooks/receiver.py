"""A webhook receiver on 127.0.0.1 for the alerts tests (the library's and `scrapy schedule`'s)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN_PATH = "/hooks/T0KEN-in-the-path"  # an incoming-webhook URL's token: never in a log or a row
CHUNK = b"x" * 65536


class Receiver:
    """An HTTP receiver on a free loopback port: records every request, answers `statuses` in turn
    (then 200), the first `hang_s` seconds late, or as soon as `release` is set (set at the exit
    too: a hung answer held the server's close for the rest of its hang); with `location`, a
    Location header (a redirect); with `stream`, an answer of that many bytes (64 kB every 10 ms):
    `done` set at its end, and `hung_up` too if the sender closed the connection first."""

    def __init__(
        self,
        statuses: list[int] | None = None,
        hang_s: float = 0.0,
        location: str | None = None,
        stream: int = 0,
    ) -> None:
        self.statuses = list(statuses or [])
        self.hang_s = hang_s
        self.received: list[dict[str, Any]] = []
        self.hung_up = threading.Event()
        self.release = threading.Event()
        self.done = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if len(receiver.received) == 1 and receiver.hang_s:
                    receiver.release.wait(receiver.hang_s)
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                if stream:
                    self.end_headers()
                    self.stream(stream)
                    return
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_POST

            def stream(self, size: int) -> None:
                try:
                    for _ in range(0, size, len(CHUNK)):
                        self.wfile.write(CHUNK)
                        time.sleep(0.01)
                except OSError:  # the sender closed the connection
                    receiver.hung_up.set()
                receiver.done.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}{TOKEN_PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
