"""What counts as a block, for the proxy pool: scrapy-rotating-proxies' ban-policy interface over
our own classification of Dutchie answers (cannaspider/dutchie/graphql.py `read`), so the pool
and the spiders agree on what a block is.

A block is a Cloudflare 403 page or 503 challenge, Cloudflare challenge markers in an HTML page
of any status, a 407 from the proxy itself, or a 429 that the RetryAfter middleware gave up on
(it sits above us in the chain: what reaches us is past its bound). It is checked on the
decompressed body: the stealth middleware sits below HttpCompressionMiddleware (590).
A network error through a proxy is the proxy's failure, except IgnoreRequest (a decision).
"""

from __future__ import annotations

from rotating_proxies.policy import BanDetectionPolicy
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from cannaspider.dutchie import graphql

CHALLENGE_MARKERS = (b"cf-browser-verification", b"challenge-platform", b"Just a moment", b"cf_chl_")
BLOCK_KINDS = ("blocked", "challenge")


class BlockPolicy(BanDetectionPolicy):
    def block_reason(self, request: Request, response: Response) -> str | None:
        status = response.status
        if status == 407:
            return "HTTP 407: the proxy refused our credentials"
        if status == 429:
            return "rate_limited: HTTP 429 past the Retry-After bound"
        if status in (403, 503):
            result = graphql.read(response)
            if isinstance(result, graphql.GraphQLFailure) and result.kind in BLOCK_KINDS:
                return result.message
            return None
        head = response.body[:512].lstrip()
        if head[:1] == b"<" and any(m in response.body for m in CHALLENGE_MARKERS):
            return f"challenge: HTTP {status} page with Cloudflare challenge markers"
        return None

    def response_is_ban(self, request: Request, response: Response) -> bool:
        return self.block_reason(request, response) is not None

    def exception_is_ban(self, request: Request, exception: BaseException) -> bool:
        return not isinstance(exception, IgnoreRequest)
