"""A forward HTTP proxy for the sandbox: proxy.py (a maintained package) in a child process,
bound to loopback, with optional basic auth. A named proxy stamps what it relays with its name
(sandbox/proxy_tag.py), which the sandbox's fault rules can target.
"""

from __future__ import annotations

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
        if self.name:
            cmd += ["--plugins", "sandbox.proxy_tag.ProxyTagPlugin", "--sandbox-proxy-name", self.name]
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
