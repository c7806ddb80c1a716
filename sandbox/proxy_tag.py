"""A proxy.py plugin for the sandbox's forward proxies: each stamps the requests it relays with
its name (`x-sandbox-proxy`), so the sandbox's Dutchie API can block one proxy and not another
(fault rules with `proxy`). Loaded in the proxy's own process by `--plugins`.

A proxy can also be made to answer every request itself, as a misbehaving real one does (a
plain-text `403 Forbidden`, its own 502…): `--sandbox-proxy-answer-file` names a JSON file
(`{"status": 403, "body": "Forbidden", "content_type": "text/plain"}`; empty or absent: relay),
read on each request so the test that started the proxy can switch it (ForwardProxy.answer)."""

from __future__ import annotations

import json
from pathlib import Path

from proxy.common.flag import flags
from proxy.http.exception import HttpRequestRejected
from proxy.http.parser import HttpParser
from proxy.http.proxy import HttpProxyBasePlugin

HEADER = b"x-sandbox-proxy"

flags.add_argument("--sandbox-proxy-name", type=str, default="", help="Name stamped on relayed requests.")
flags.add_argument("--sandbox-proxy-answer-file", type=str, default="", help="JSON: answer this instead of relaying.")


def own_answer(path: str) -> dict | None:
    try:
        text = Path(path).read_text() if path else ""
    except OSError:
        return None
    return json.loads(text) if text.strip() else None


class ProxyTagPlugin(HttpProxyBasePlugin):
    def before_upstream_connection(self, request: HttpParser) -> HttpParser | None:
        answer = own_answer(getattr(self.flags, "sandbox_proxy_answer_file", ""))
        if answer is not None:  # the proxy's own answer: nothing reaches the upstream
            raise HttpRequestRejected(
                status_code=int(answer["status"]),
                reason=answer.get("reason", "Error").encode(),
                headers={b"Content-Type": answer.get("content_type", "text/plain").encode()},
                body=answer.get("body", "").encode(),
            )
        return request

    def handle_client_request(self, request: HttpParser) -> HttpParser | None:
        # proxy.py checks the credentials on the connection's first request but relays the header
        # on the next ones (keep-alive): a real proxy never passes it on to the site
        request.del_header(b"proxy-authorization")
        name = getattr(self.flags, "sandbox_proxy_name", "")
        if name:
            request.del_header(HEADER)
            request.add_header(HEADER, name.encode())
        return request
