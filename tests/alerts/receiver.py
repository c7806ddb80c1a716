"""A webhook receiver on 127.0.0.1 for the alerts tests (the library's and `scrapy schedule`'s)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN_PATH = "/hooks/T0KEN-in-the-path"  # an incoming-webhook URL's token: never in a log or a row


class Receiver:
    """An HTTP receiver on a free loopback port: records every POST, answers `statuses` in turn
    (then 200), the first `hang_s` seconds late."""

    def __init__(self, statuses: list[int] | None = None, hang_s: float = 0.0) -> None:
        self.statuses = list(statuses or [])
        self.hang_s = hang_s
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if len(receiver.received) == 1 and receiver.hang_s:
                    time.sleep(receiver.hang_s)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{TOKEN_PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
