"""Browser pages' identities and contexts (scrapy-playwright renders a store's own website in
Chromium): the identity each page presents, and the browser context of each proxy and identity
(BrowserContexts, below).

The identity of a page must be the browser that really renders it: a Chrome identity (desktop on
Windows, macOS or Linux, or Android phone or tablet) whose version is the launched Chromium's, so
the User-Agent, the client hints and what JavaScript reads (navigator.userAgentData,
navigator.platform) agree with the engine's behaviour. Never a Safari or Firefox User-Agent on
Chromium, never "HeadlessChrome".

browserforge (stealth/identity.py) is not used here: its Chrome versions are those of its data,
not of the binary on this machine. Chrome's own formats leave nothing to draw but the platform and
the device: since Chrome 110 the User-Agent is "reduced" (a fixed platform string and
`Chrome/<major>.0.0.0`), and `sec-ch-ua` is Chrome's GREASE brand list, computed from the major
version exactly as Chromium does (components/embedder_support/user_agent_utils.cc).

The device class is drawn as for HTTP identities (Mobile 62 % / Desktop 36 % / Tablet 2 %); the
desktop platforms in the weights Chrome has there. Screen sizes are common ones per class.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scrapy import Request

from cannaspider.stealth.identity import (
    BROWSERS_BY_DEVICE,
    DEVICE_WEIGHTS,
    FETCH_HEADERS,
    PLATFORM_HINT,
    Identity,
    IdentityError,
    accept_language,
)
from cannaspider.stealth.locales import store_timezone
from cannaspider.stealth.proxies import ProxyRecord

# Chrome's reduced User-Agent: the platform part is frozen per platform (chromium.org/updates/ua-reduction)
UA_PLATFORM = {
    "windows": "Windows NT 10.0; Win64; x64",
    "macos": "Macintosh; Intel Mac OS X 10_15_7",
    "linux": "X11; Linux x86_64",
    "android": "Linux; Android 10; K",
}
NAVIGATOR_PLATFORM = {"windows": "Win32", "macos": "MacIntel", "linux": "Linux x86_64", "android": "Linux armv81"}
HINT_PLATFORM = {"windows": "Windows", "macos": "macOS", "linux": "Linux", "android": "Android"}
# high-entropy hints (sent only when a site asks with Accept-CH, or read by getHighEntropyValues)
PLATFORM_VERSIONS = {
    "windows": ("10.0.0", "15.0.0", "19.0.0"),  # Windows 10, Windows 11 23H2 / 24H2
    "macos": ("14.7.6", "15.5.0", "15.6.1"),
    "linux": ("6.8.0", "6.11.0"),
    "android": ("13.0.0", "14.0.0", "15.0.0"),
}
ARCHITECTURE = {"windows": "x86", "macos": "arm", "linux": "x86", "android": ""}
PHONE_MODELS = ("Pixel 8", "Pixel 7a", "SM-S921B", "SM-A546B", "moto g 5G - 2024")
TABLET_MODELS = ("SM-X710", "Pixel Tablet")
# (screen, viewport (the page's inner size), device scale factor)
Screen = tuple[tuple[int, int], tuple[int, int], float]
SCREENS: dict[str, tuple[Screen, ...]] = {
    "desktop": (
        ((1920, 1080), (1920, 945), 1.0),
        ((1536, 864), (1536, 730), 1.25),
        ((1366, 768), (1366, 633), 1.0),
        ((2560, 1440), (2560, 1305), 1.0),
    ),
    "mac": (((1440, 900), (1440, 791), 2.0), ((1512, 982), (1512, 857), 2.0), ((1728, 1117), (1728, 992), 2.0)),
    "mobile": (
        ((412, 915), (412, 839), 2.625),
        ((384, 854), (384, 778), 2.8125),
        ((360, 800), (360, 724), 3.0),
        ((393, 873), (393, 797), 2.75),
    ),
    "tablet": (((800, 1280), (800, 1216), 2.0), ((1280, 800), (1280, 736), 2.0)),
}
# Chrome on the desktop, in the weights it has among HTTP identities
DESKTOP_PLATFORMS = tuple((os_name, w) for b, os_name, w in BROWSERS_BY_DEVICE["desktop"] if b == "chrome")

_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)\.(\d+)\b")
_GREASE_CHARS = (" ", "(", ":", "-", ".", "/", ")", ";", "=", "?", "_")
_GREASE_VERSIONS = ("8", "99", "24")
_BRAND_ORDERS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))


def chrome_brands(major: int, full_version: str | None = None) -> list[tuple[str, str]]:
    """Chrome's `sec-ch-ua` brand list for a major version, as Chromium computes it: a GREASE brand
    whose name, version and position follow from the version, then Chromium and Google Chrome.
    With `full_version`: the full-version list (`Sec-CH-UA-Full-Version-List`)."""
    seed = major
    grease_name = f"Not{_GREASE_CHARS[seed % 11]}A{_GREASE_CHARS[(seed + 1) % 11]}Brand"
    grease_version = _GREASE_VERSIONS[seed % 3]
    version = full_version or str(major)
    brands = [
        (grease_name, f"{grease_version}.0.0.0" if full_version else grease_version),
        ("Chromium", version),
        ("Google Chrome", version),
    ]
    ordered: list[tuple[str, str]] = [("", "")] * 3
    for slot, brand in zip(_BRAND_ORDERS[seed % 6], brands, strict=True):
        ordered[slot] = brand
    return ordered


def sec_ch_ua(brands: list[tuple[str, str]]) -> str:
    return ", ".join(f'"{name}";v="{version}"' for name, version in brands)


def chrome_user_agent(os_name: str, major: int, mobile: bool) -> str:
    mobile_part = "Mobile " if mobile else ""
    return (
        f"Mozilla/5.0 ({UA_PLATFORM[os_name]}) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"Chrome/{major}.0.0.0 {mobile_part}Safari/537.36"
    )


def parse_version(text: str) -> str:
    """`Chromium 156.0.8078.114 built on …` → `156.0.8078.114`; IdentityError when there is none."""
    found = _VERSION.search(text)
    if not found:
        raise IdentityError(f"no browser version in {text.strip()[:100]!r}")
    return found.group(0)


async def chromium_version(executable: str, timeout: float = 20.0) -> str:
    """The full version of the Chromium at `executable` (`--version`, once per crawl)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            executable,
            "--version",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except (OSError, TimeoutError) as exc:
        raise IdentityError(f"cannot read the version of the browser {executable}: {exc}") from None
    return parse_version(out.decode("utf-8", "replace"))


def proxy_settings(proxy: ProxyRecord) -> dict[str, str]:
    """Playwright's `proxy` for a context: the server without credentials, which go apart (Chromium
    answers the proxy's 407 with them). Chromium knows no `socks5h`: its `socks5` already leaves
    name resolution to the proxy. A SOCKS5 proxy with a password is never given to a browser
    (ProxyRecord.browser_refusal: the pool does not choose it for browser pages)."""
    scheme = "socks5" if proxy.protocol == "socks5h" else proxy.protocol
    settings = {"server": f"{scheme}://{proxy.host}:{proxy.port}"}
    if proxy.username is not None:
        settings["username"] = proxy.username
        settings["password"] = proxy.password or ""
    return settings


@dataclass(frozen=True)
class BrowserIdentity:
    device: str  # mobile | desktop | tablet
    os: str  # windows | macos | linux | android
    version: str  # the real browser's full version
    user_agent: str
    accept_language: str
    locale: str
    timezone: str
    screen: tuple[int, int]
    viewport: tuple[int, int]
    scale: float
    model: str
    platform_version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def mobile(self) -> bool:
        return self.device == "mobile"

    @property
    def key(self) -> str:
        """Short and stable: names the browser context (with the proxy's row id)."""
        return hashlib.sha1(repr(self).encode()).hexdigest()[:10]

    def client_hints(self) -> dict[str, str]:
        return {
            "sec-ch-ua": sec_ch_ua(chrome_brands(self.major)),
            "sec-ch-ua-mobile": "?1" if self.mobile else "?0",
            "sec-ch-ua-platform": PLATFORM_HINT[self.os],
        }

    def identity(self) -> Identity:
        """The same browser for the store's HTTP requests (a fetch() from its pages)."""
        headers = {
            "user-agent": self.user_agent,
            **self.client_hints(),
            "accept-encoding": "gzip, deflate, br, zstd",
            "accept-language": self.accept_language,
            **FETCH_HEADERS,
        }
        return Identity("chrome", self.device, self.os, self.user_agent, tuple(headers.items()))

    def context_kwargs(self, proxy: ProxyRecord) -> dict[str, Any]:
        """Playwright's new_context() arguments. No `locale`: Playwright turns it into a bare
        `Accept-Language: es-PR` on every request; the page's languages are set with the
        User-Agent override instead (`user_agent_override`, `locale_override`)."""
        return {
            "proxy": proxy_settings(proxy),
            "user_agent": self.user_agent,
            "viewport": {"width": self.viewport[0], "height": self.viewport[1]},
            "screen": {"width": self.screen[0], "height": self.screen[1]},
            "device_scale_factor": self.scale,
            "is_mobile": self.mobile,
            "has_touch": self.device != "desktop",
            "timezone_id": self.timezone,
        }

    def user_agent_override(self) -> dict[str, Any]:
        """CDP `Emulation.setUserAgentOverride` for a page: Chromium then sends the client hints
        itself (on every request, in its own header order) and JavaScript reads the same."""
        return {
            "userAgent": self.user_agent,
            # without q-values: Chromium writes them (`en-US,en;q=0.9`), as for a user's settings
            "acceptLanguage": ",".join(part.split(";")[0] for part in self.accept_language.split(",")),
            "platform": NAVIGATOR_PLATFORM[self.os],
            "userAgentMetadata": {
                "brands": [{"brand": b, "version": v} for b, v in chrome_brands(self.major)],
                "fullVersionList": [{"brand": b, "version": v} for b, v in chrome_brands(self.major, self.version)],
                "fullVersion": self.version,
                "platform": HINT_PLATFORM[self.os],
                "platformVersion": self.platform_version,
                "architecture": ARCHITECTURE[self.os],
                "model": self.model,
                "mobile": self.mobile,
                "bitness": "" if self.os == "android" else "64",
                "wow64": False,
            },
        }

    def locale_override(self) -> dict[str, str]:
        return {"locale": self.locale}


class BrowserIdentityFactory:
    """Draws Chrome identities for the Chromium of `version` (its full version)."""

    def __init__(self, version: str, rng: random.Random | None = None):
        self.version = parse_version(version)
        self.rng = rng or random.Random()

    def draw(
        self, state: str | None = None, timezone: str | None = None, avoid: frozenset[str] = frozenset()
    ) -> BrowserIdentity:
        """A new identity; not one whose key is in `avoid` (those a block just burnt)."""
        for _ in range(50):
            identity = self._draw(state, timezone)
            if identity.key not in avoid:
                return identity
        return identity  # everything drawn was burnt: a long shot, the new proxy still makes it new

    def _draw(self, state: str | None, timezone: str | None) -> BrowserIdentity:
        rng = self.rng
        device = rng.choices(list(DEVICE_WEIGHTS), weights=list(DEVICE_WEIGHTS.values()))[0]
        if device == "desktop":
            os_name = rng.choices([o for o, _ in DESKTOP_PLATFORMS], weights=[w for _, w in DESKTOP_PLATFORMS])[0]
            screens = SCREENS["mac" if os_name == "macos" else "desktop"]
            model = ""
        else:  # phones and tablets: Android (Chrome on iOS is WebKit, not this engine)
            os_name = "android"
            screens = SCREENS[device]
            model = rng.choice(PHONE_MODELS if device == "mobile" else TABLET_MODELS)
        screen, viewport, scale = rng.choice(screens)
        languages = accept_language("chrome", state, timezone)
        return BrowserIdentity(
            device=device,
            os=os_name,
            version=self.version,
            user_agent=chrome_user_agent(os_name, int(self.version.split(".")[0]), device == "mobile"),
            accept_language=languages,
            locale=languages.split(",")[0],
            timezone=store_timezone(state, timezone),
            screen=screen,
            viewport=viewport,
            scale=scale,
            model=model,
            platform_version=rng.choice(PLATFORM_VERSIONS[os_name]),
        )


# The browser contexts of a crawl's browser pages (scrapy-playwright): one per proxy and identity.
#
# scrapy-playwright creates a context the first time a request names it (`playwright_context`), with
# that request's `playwright_context_kwargs` (here: the proxy and the identity), and keeps it until
# the crawl ends. We see each context when its first page starts (the page init callback), and:
# - give the page the identity's User-Agent metadata and languages over CDP (Playwright's
#   `user_agent` alone leaves Chromium's own brand list, without "Google Chrome", and the host's
#   navigator.platform); the CDP session stays attached while the page lives (detaching would end
#   the override);
# - note the version of the browser really launched, which the stealth middleware compares with the
#   identity's;
# - close contexts no store crawl uses any more (their proxy left the pool, or a block rotated the
#   store to another proxy and identity), and keep at most KEEP_IDLE other idle ones: a store whose
#   context was closed gets it again, same name and identity, when it asks (without its cookies).
#
# Only idle contexts (no open page) are closed. A page that starts in one at the same moment fails
# with TargetClosedError, which scrapy-playwright retries in a new context of the same name.

logger = logging.getLogger(__name__)

IDENTITY_META = "stealth_browser_identity"  # the BrowserIdentity the page must present
VERSION_META = "stealth_browser_version"  # set by the page init callback: the launched browser's version
KEEP_IDLE = 8


def context_name(proxy: ProxyRecord, identity: BrowserIdentity) -> str:
    """The proxy's row id and the identity's key: never its address or credentials."""
    return f"stealth-proxy{proxy.id}-{identity.key}"


class BrowserContexts:
    def __init__(self) -> None:
        self.contexts: OrderedDict[str, Any] = OrderedDict()  # name → playwright BrowserContext, oldest use first
        self._sessions: dict[int, Any] = {}  # page → its CDP session (the override lives as long as it)

    async def init_page(self, page: Any, request: Request) -> None:
        """scrapy-playwright's `playwright_page_init_callback`: before the page navigates."""
        name = request.meta.get("playwright_context")
        if name is not None:
            self.contexts[name] = page.context
            self.contexts.move_to_end(name)
        browser = page.context.browser
        if browser is not None:
            request.meta[VERSION_META] = browser.version
        identity: BrowserIdentity | None = request.meta.get(IDENTITY_META)
        if identity is None:
            return
        cdp = await page.context.new_cdp_session(page)
        await cdp.send("Emulation.setUserAgentOverride", identity.user_agent_override())
        await cdp.send("Emulation.setLocaleOverride", identity.locale_override())
        self._sessions[id(page)] = cdp
        page.on("close", lambda _page: self._sessions.pop(id(page), None))

    async def sweep(self, is_live: Callable[[str], bool], keep: str | None = None) -> list[str]:
        """Close the idle contexts nobody uses, then the oldest idle ones beyond KEEP_IDLE.
        Returns the names closed."""
        closed = []
        idle = [n for n, ctx in self.contexts.items() if n != keep and not ctx.pages]
        retired = [n for n in idle if not is_live(n)]
        kept = [n for n in idle if n not in retired]
        for name in retired + kept[: max(0, len(kept) - KEEP_IDLE)]:
            context = self.contexts.pop(name)
            try:
                await context.close()
            except Exception as exc:  # noqa: BLE001 - already closed with the browser: nothing left to free
                logger.debug("browser context %s: close failed: %s", name, exc)
            closed.append(name)
        if closed:
            logger.debug("closed %d browser context(s) no longer in use", len(closed))
        return closed
