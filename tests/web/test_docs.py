"""`/` and the API docs: no page of the service needs a host other than itself."""

from __future__ import annotations

import re
from http.client import HTTPConnection
from urllib.parse import urljoin, urlparse

from tests.httpclient import http

URL = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]|url\(([^)]+)\)""")


def test_root_redirects_to_the_dashboard(api):
    conn = HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.request("GET", "/")
    reply = conn.getresponse()
    assert reply.status in (302, 303, 307) and reply.getheader("location") == "/dashboard/"
    assert http("GET", api.base + "/").status == 200  # followed: the dashboard
    assert "/" not in http("GET", api.base + "/openapi.json").json()["paths"]


def test_the_docs_pages_load_everything_from_the_service_itself(api):
    for page in ("/docs", "/redoc"):
        reply = http("GET", api.base + page)
        assert reply.status == 200, page
        refs = [a or b for a, b in URL.findall(reply.text)]
        assert refs, page
        for ref in refs:
            absolute = urljoin(api.base + page, ref.strip())
            host = urlparse(absolute).hostname
            assert host == "127.0.0.1", f"{page} references {ref}"
            # every asset it names is served, non-empty
            asset = http("GET", absolute)
            assert asset.status == 200 and asset.body, absolute
        assert "cdn" not in reply.text.lower() and "googleapis" not in reply.text
    assert "validatorUrl" in http("GET", api.base + "/docs").text  # no badge calling swagger.io
