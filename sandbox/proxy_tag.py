"""A proxy.py plugin for the sandbox's forward proxies: each stamps the requests it relays with
its name (`x-sandbox-proxy`), so the sandbox's Dutchie API can block one proxy and not another
(fault rules with `proxy`). Loaded in the proxy's own process by `--plugins`."""

from __future__ import annotations

from proxy.common.flag import flags
from proxy.http.parser import HttpParser
from proxy.http.proxy import HttpProxyBasePlugin

HEADER = b"x-sandbox-proxy"

flags.add_argument("--sandbox-proxy-name", type=str, default="", help="Name stamped on relayed requests.")


class ProxyTagPlugin(HttpProxyBasePlugin):
    def before_upstream_connection(self, request: HttpParser) -> HttpParser | None:
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
