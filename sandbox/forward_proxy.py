"""A forward HTTP proxy for the sandbox: proxy.py (a maintained package) in a child process,
bound to loopback, with optional basic auth. A named proxy stamps what it relays with its name
(sandbox/proxy_tag.py), which the sandbox's fault rules can target; `answer()` makes it answer
every request itself (a misbehaving proxy's plain-text 403, its own 502…) until `relay()`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class ForwardProxy:
    def __init__(self, username: str | None = None, password: str | None = None, name: str | None = None):
        self.username, self.password, self.name = username, password, name
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.answer_file: Path | None = None

    def start(self, timeout: float = 20.0) -> ForwardProxy:
        port_file = Path(tempfile.mkstemp(prefix="cannaspider-proxy-", suffix=".port")[1])
        port_file.unlink()
        cmd = [
            sys.executable,
            "-m",
            "proxy",
            "--hostname",
            "127.0.0.1",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--num-workers",
            "1",
            "--num-acceptors",
            "1",
            "--log-level",
            "WARNING",
        ]
        self.answer_file = Path(tempfile.mkstemp(prefix="cannaspider-proxy-", suffix=".answer")[1])
        cmd += ["--plugins", "sandbox.proxy_tag.ProxyTagPlugin"]
        cmd += ["--sandbox-proxy-answer-file", str(self.answer_file)]
        if self.name:
            cmd += ["--sandbox-proxy-name", self.name]
        if self.username:
            cmd += ["--basic-auth", f"{self.username}:{self.password or ''}"]
        self.process = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                self.port = int(port_file.read_text().strip())
                port_file.unlink()
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("the sandbox forward proxy (proxy.py) did not start")

    def answer(self, status: int, body: str = "", content_type: str = "text/plain", reason: str = "Error") -> None:
        """From now on answer every request with this, as the proxy's own (nothing is relayed)."""
        assert self.answer_file is not None, "start() the proxy first"
        rule = {"status": status, "body": body, "content_type": content_type, "reason": reason}
        self.answer_file.write_text(json.dumps(rule))

    def relay(self) -> None:
        """Relay again (the default)."""
        if self.answer_file is not None:
            self.answer_file.write_text("")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
            # proxy.py's acceptor/worker children may outlive its main process by a moment and hold
            # the listening socket: nothing of the group may survive stop()
            try:
                os.killpg(self.process.pid, 9)
            except ProcessLookupError:
                pass
            self.process.wait(5)
        self.process = None
        if self.answer_file is not None:
            self.answer_file.unlink(missing_ok=True)
            self.answer_file = None
