"""Which requests go through the stealth layer, which store crawl's session each belongs to, and
the request meta keys it reads and leaves (docs/stealth.md).

The proxy's credentials travel only in `meta["proxy"]` (user:password@host:port): Scrapy's
HttpProxyMiddleware (750) turns them into Proxy-Authorization on every attempt. `wear` removes any
Proxy-Authorization an earlier attempt left, so a retry through another proxy never carries the
first one's credentials, and a proxy without credentials gets none.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from cannaspider.stealth.browser import IDENTITY_META, VERSION_META
from cannaspider.stealth.identity import Identity

PROXY_META = "stealth_proxy_id"
RETRIES_META = "stealth_retries"
TRIED_META = "stealth_tried"  # ids of the proxies that already failed this request
TRIED_BROWSERS_META = "stealth_tried_browsers"  # keys of the browser identities that failed this page
SENT_META = "stealth_sent_at"  # time.monotonic() when this attempt left: the pool's failure events
PIN_META = "stealth_pinned_proxy"  # a ProxyRecord: this proxy only, no rotation (`scrapy proxies check`)
# what a browser attempt leaves in meta that the next attempt must not inherit
BROWSER_ATTEMPT_META = (
    "playwright_context",
    "playwright_context_kwargs",
    "playwright_page_init_callback",
    IDENTITY_META,
    VERSION_META,
)


class ProxyBlocked(IgnoreRequest):
    """A page stayed blocked through every retry (or no proxy is left)."""


def session_key(request: Request) -> object:
    """The store crawl a request belongs to: its `store_crawl` or `dispensary_id` meta, else the
    search point of store discovery, else the whole crawl."""
    meta = request.meta
    crawl = meta.get("store_crawl")
    if crawl is not None and getattr(crawl, "dispensary_id", None) is not None:
        return ("dispensary", crawl.dispensary_id)
    if meta.get("dispensary_id") is not None:
        return ("dispensary", meta["dispensary_id"])
    if meta.get("point") is not None:
        return ("point", meta["point"])
    return ("crawl",)


def wear(request: Request, identity: Identity) -> None:
    """The request's headers become the identity's (its own kept where the identity sets none),
    in the identity's order; no Proxy-Authorization is kept (HttpProxyMiddleware writes it)."""
    own = [
        (k.decode("latin-1"), v[-1].decode("latin-1"))
        for k, v in request.headers.items()
        if v and k.lower() != b"proxy-authorization"
    ]
    request.headers.clear()
    for name, value in identity.apply(own):
        request.headers[name] = value


def is_browser_page(request: Request) -> bool:
    return bool(request.meta.get("playwright"))


def applies(request: Request) -> bool:
    """Dutchie's API: every GraphQL request; every browser page (a store's own website); and any
    request that asks with meta `stealth`."""
    meta = request.meta
    return "graphql_operation" in meta or bool(meta.get("stealth")) or is_browser_page(request)


def counts_on_proxy(request: Request) -> bool:
    """Whether the answer judges the proxy (health, blocks, rotation). Images say no (meta
    `proxy_health` False): an image CDN that serves a proxy says nothing of its standing with the
    API, and its successes would fill the window of recent attempts that deactivates a blocked
    proxy (docs/stealth.md, "Failures")."""
    return request.meta.get("proxy_health", True) is not False
