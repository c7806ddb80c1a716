"""What counts against a proxy, for the pool: scrapy-rotating-proxies' ban-policy interface over
our own classification of the API's answers (the default platform's `classify`, cannaspider/platforms/), so the pool
and the spiders agree on what a block is (docs/stealth.md, "Failures").

Two kinds of failure, both counted on the proxy, both rotating proxy and identity:
- a **block**: Cloudflare's 403 page or 503 challenge (Cloudflare's by its headers or its page),
  Cloudflare challenge markers in an HTML page of any status, a 407 from the proxy itself, or a
  429 that the RetryAfter middleware gave up on (it sits above us in the chain: what reaches us
  is past its bound);
- a **proxy error**: an answer that is not the API's. Dutchie's GraphQL API answers JSON objects,
  behind Cloudflare; a GraphQL request answered by something else (a plain-text `403 Forbidden`,
  a 500/502/404 page without Cloudflare's marks, a truncated body) got that answer from the proxy
  on the way, not from the API. A 403/503 HTML page that is not Cloudflare's is also the proxy's
  (or the site's own) and is not reported as a Cloudflare block.

An answer with Cloudflare's marks that is no block (an origin 500 passed through by the CDN) is the
API's: it goes on to RetryMiddleware and the spider, and says nothing against the proxy.
It is all checked on the decompressed body: the stealth middleware sits below
HttpCompressionMiddleware (590). A network error through a proxy is the proxy's failure, except
IgnoreRequest (a decision).
"""

from __future__ import annotations

from dataclasses import dataclass

from rotating_proxies.policy import BanDetectionPolicy
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from cannaspider import platforms
from cannaspider.platforms.interface import PlatformFailure

CHALLENGE_MARKERS = (b"cf-browser-verification", b"challenge-platform", b"Just a moment", b"cf_chl_")
# what Cloudflare's own pages carry (its block page: "Attention Required! | Cloudflare", cf-error-details)
CLOUDFLARE_PAGE_MARKERS = (b"cloudflare", b"cf-error-details", *CHALLENGE_MARKERS)
CLOUDFLARE_HEADERS = (b"cf-ray", b"cf-mitigated", b"cf-cache-status")
BLOCK_KINDS = ("blocked", "challenge")
BLOCK, PROXY_ERROR = "block", "proxy_error"


@dataclass(frozen=True)
class Verdict:
    kind: str  # BLOCK | PROXY_ERROR
    reason: str  # one line for logs and the proxy's last_error (no credentials: none are in a response)


def from_cloudflare(response: Response) -> bool:
    """The answer came from Dutchie's edge: Cloudflare's headers, or one of its pages."""
    headers = response.headers
    if any(name in headers for name in CLOUDFLARE_HEADERS):
        return True
    if b"cloudflare" in (headers.get(b"Server") or b"").lower():
        return True
    head = response.body[:512].lstrip()
    return head[:1] == b"<" and any(m in response.body for m in CLOUDFLARE_PAGE_MARKERS)


def is_json_object(body: bytes) -> bool:
    """Shaped as the API's answers (a JSON object, whole). A cheap look at both ends: the spider
    parses it (and says `malformed` when it is not valid after all)."""
    stripped = body.strip()
    return stripped[:1] == b"{" and stripped[-1:] == b"}"


def _described(response: Response) -> str:
    kind = (response.headers.get(b"Content-Type") or b"no content type").split(b";")[0].decode("latin-1")
    return f"HTTP {response.status} {kind}, {len(response.body)} bytes"


class BlockPolicy(BanDetectionPolicy):  # type: ignore[misc]  # rotating_proxies is untyped
    def judge(self, request: Request, response: Response) -> Verdict | None:
        """Why this answer counts against its proxy, or None (the API's answer)."""
        status = response.status
        if status == 407:
            return Verdict(BLOCK, "HTTP 407: the proxy refused our credentials")
        if status == 429:
            return Verdict(BLOCK, "rate_limited: HTTP 429 past the Retry-After bound")
        cloudflare = from_cloudflare(response)
        if status in (403, 503):
            # the API the proxies carry is the default platform's: its own reading of the answer
            result = platforms.get(platforms.DEFAULT).classify(response)
            if isinstance(result, PlatformFailure) and result.kind in BLOCK_KINDS:
                if cloudflare:
                    return Verdict(BLOCK, result.message)
                return Verdict(PROXY_ERROR, f"proxy_error: {_described(response)}: a page that is not Cloudflare's")
        head = response.body[:512].lstrip()
        if head[:1] == b"<" and any(m in response.body for m in CHALLENGE_MARKERS):
            return Verdict(BLOCK, f"challenge: HTTP {status} page with Cloudflare challenge markers")
        if "graphql_operation" in request.meta and not cloudflare and not is_json_object(response.body):
            return Verdict(PROXY_ERROR, f"proxy_error: {_described(response)}: not an answer of the API")
        return None

    def block_reason(self, request: Request, response: Response) -> str | None:
        verdict = self.judge(request, response)
        return verdict.reason if verdict is not None else None

    def response_is_ban(self, request: Request, response: Response) -> bool:
        return self.judge(request, response) is not None

    def exception_is_ban(self, request: Request, exception: BaseException) -> bool:
        return not isinstance(exception, IgnoreRequest)
