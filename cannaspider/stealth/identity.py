"""Browser identities: one per store crawl (the "stealth session"), drawn like real traffic.

The device class is drawn Mobile 62 % / Desktop 36 % / Tablet 2 %, then a browser among Chrome,
Safari, Edge and Firefox with the platform it really runs on there. The User-Agent and client
hints come from browserforge (a maintained generator fed by Apify's fingerprint data); the rest
is what that browser sends on a same-origin `fetch()` of the GraphQL API: Sec-Fetch-* as for
fetch (cors/empty), Accept-Language from the store's state, and the browser's own header order.
Chromium browsers (Chrome, Edge) send `sec-ch-ua`, `sec-ch-ua-mobile`, `sec-ch-ua-platform`;
Firefox and Safari send none. A generated set that is not coherent is drawn again; when no
coherent identity comes out, IdentityError stops the crawl (there is no fallback identity).

iPads are the tablets here: iPadOS Safari presents itself as desktop Safari on macOS.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

DEVICE_WEIGHTS: dict[str, float] = {"mobile": 62.0, "desktop": 36.0, "tablet": 2.0}
# (browser, operating system, weight within the device class): browsers only where they exist
# (no Chrome on iOS here: it is WebKit and sends no client hints, browserforge gets it wrong)
BROWSERS_BY_DEVICE: dict[str, tuple[tuple[str, str, float], ...]] = {
    "mobile": (("chrome", "android", 55), ("safari", "ios", 40), ("firefox", "android", 3), ("edge", "android", 2)),
    "desktop": (
        ("chrome", "windows", 40),
        ("chrome", "macos", 15),
        ("edge", "windows", 18),
        ("safari", "macos", 12),
        ("firefox", "windows", 8),
        ("firefox", "macos", 3),
        ("chrome", "linux", 2),
        ("firefox", "linux", 2),
    ),
    "tablet": (("safari", "macos", 100),),
}
BROWSERS = ("chrome", "safari", "edge", "firefox")
CHROMIUM = ("chrome", "edge")
CLIENT_HINTS = ("sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform")
PLATFORM_HINT = {"windows": '"Windows"', "macos": '"macOS"', "linux": '"Linux"', "android": '"Android"'}
MAX_DRAWS = 25

# Header order per browser on a fetch() (lower case; names not listed keep their place after
# content-type, which is where an app's own headers go).
HEADER_ORDER: dict[str, tuple[str, ...]] = {
    "chrome": (
        "host",
        "connection",
        "sec-ch-ua-platform",
        "user-agent",
        "sec-ch-ua",
        "content-type",
        "*",
        "sec-ch-ua-mobile",
        "accept",
        "sec-fetch-site",
        "sec-fetch-mode",
        "sec-fetch-dest",
        "referer",
        "accept-encoding",
        "accept-language",
        "cookie",
    ),  # fmt: skip
    "firefox": (
        "host",
        "user-agent",
        "accept",
        "accept-language",
        "accept-encoding",
        "content-type",
        "*",
        "referer",
        "connection",
        "cookie",
        "sec-fetch-dest",
        "sec-fetch-mode",
        "sec-fetch-site",
    ),  # fmt: skip
    "safari": (
        "host",
        "content-type",
        "*",
        "accept",
        "sec-fetch-site",
        "sec-fetch-dest",
        "accept-language",
        "sec-fetch-mode",
        "user-agent",
        "referer",
        "accept-encoding",
        "connection",
        "cookie",
    ),  # fmt: skip
}
HEADER_ORDER["edge"] = HEADER_ORDER["chrome"]
FETCH_HEADERS = {"sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty"}
# what an identity owns: on a request it replaces every one of them, including those it does not
# send (a Safari identity after a Chrome one must not keep its sec-ch-ua)
IDENTITY_HEADERS = frozenset(
    {"user-agent", "accept-encoding", "accept-language", *CLIENT_HINTS, *FETCH_HEADERS, "sec-fetch-user", "te"}
)


class IdentityError(RuntimeError):
    """No coherent identity could be generated. str() is one line."""


@dataclass(frozen=True)
class Identity:
    browser: str  # chrome | safari | edge | firefox
    device: str  # mobile | desktop | tablet
    os: str  # windows | macos | linux | android | ios
    user_agent: str
    headers: tuple[tuple[str, str], ...]  # lower-case names, no request-specific ones

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def apply(self, request_headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The request's own headers (content-type, the app's x-* headers, accept) merged with the
        identity's, in this browser's order. The identity wins for the headers it sets."""
        own = {k.lower(): v for k, v in request_headers if k.lower() not in IDENTITY_HEADERS}
        merged = {**own, **dict(self.headers)}
        order = HEADER_ORDER[self.browser]
        star = order.index("*")
        rank = {name: i for i, name in enumerate(order)}
        return sorted(merged.items(), key=lambda kv: rank.get(kv[0], star))


def accept_language(browser: str, state: str | None = None, timezone: str | None = None) -> str:
    """What a resident's browser sends: Spanish first in Puerto Rico, else US English. Firefox
    writes its q-values its own way."""
    spanish = (state or "").upper() == "PR" or timezone == "America/Puerto_Rico"
    if browser == "firefox":
        return "es-PR,es;q=0.8,en-US;q=0.5,en;q=0.3" if spanish else "en-US,en;q=0.5"
    return "es-PR,es;q=0.9,en-US;q=0.8,en;q=0.7" if spanish else "en-US,en;q=0.9"


_CHROMIUM_MAJOR = re.compile(r"(?:Chrome|CriOS)/(\d+)")
_BRAND_VERSION = re.compile(r'"(Google Chrome|Microsoft Edge)";v="(\d+)"')


def coherence_problems(identity: Identity) -> list[str]:
    """Why a header set could not come from the browser it claims (empty: coherent)."""
    ua, problems = identity.user_agent, []
    hints = {k: identity.header(k) for k in CLIENT_HINTS}
    if identity.browser not in BROWSERS:
        problems.append(f"browser {identity.browser!r} is not one of {BROWSERS}")
    if identity.browser in CHROMIUM:
        if any(v is None for v in hints.values()):
            problems.append("a Chromium User-Agent without client hints")
        brand = "Microsoft Edge" if identity.browser == "edge" else "Google Chrome"
        found = _BRAND_VERSION.search(hints["sec-ch-ua"] or "")
        major = _CHROMIUM_MAJOR.search(ua)
        if not found or found.group(1) != brand:
            problems.append(f"sec-ch-ua does not name {brand}")
        elif not major or major.group(1) != found.group(2):
            problems.append("sec-ch-ua version differs from the User-Agent's")
        if ("Edg" in ua) != (identity.browser == "edge"):
            problems.append("User-Agent and browser disagree about Edge")
        if hints["sec-ch-ua-mobile"] != ("?1" if "Mobile" in ua else "?0"):
            problems.append("sec-ch-ua-mobile disagrees with the User-Agent")
        if hints["sec-ch-ua-platform"] != PLATFORM_HINT.get(identity.os):
            problems.append("sec-ch-ua-platform disagrees with the operating system")
    else:
        if any(v is not None for v in hints.values()):
            problems.append(f"{identity.browser} sends no client hints")
        if identity.browser == "firefox" and "Firefox/" not in ua:
            problems.append("not a Firefox User-Agent")
        if identity.browser == "safari" and ("Version/" not in ua or "Chrome" in ua or "Safari/" not in ua):
            problems.append("not a Safari User-Agent")
    mobile_ua = "Mobile" in ua or "iPhone" in ua
    if (identity.device == "mobile") != mobile_ua:
        problems.append(f"a {identity.device} identity with a {'mobile' if mobile_ua else 'desktop'} User-Agent")
    return problems


class IdentityFactory:
    """Draws identities; one generator per process (building it loads browserforge's networks)."""

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random()
        try:
            from browserforge.headers import HeaderGenerator  # noqa: PLC0415 - browserforge loads its networks on import: only when identities are drawn

            self._generator: Any = HeaderGenerator(http_version=2)
        except Exception as exc:  # the package or its data is broken: no identity at all
            raise IdentityError(f"cannot load the browser header generator (browserforge): {exc}") from exc

    def draw_device_browser(self) -> tuple[str, str, str]:
        device = self.rng.choices(list(DEVICE_WEIGHTS), weights=list(DEVICE_WEIGHTS.values()))[0]
        options = BROWSERS_BY_DEVICE[device]
        browser, os_name, _ = self.rng.choices(options, weights=[w for *_, w in options])[0]
        return device, browser, os_name

    def draw(self, state: str | None = None, timezone: str | None = None) -> Identity:
        device, browser, os_name = self.draw_device_browser()
        last = "no header set generated"
        for _ in range(MAX_DRAWS):
            try:
                generated = self._generator.generate(
                    browser=browser, os=os_name, device="desktop" if device == "tablet" else device, locale="en-US"
                )
            except Exception as exc:  # noqa: BLE001 - one failed draw is retried with another browser; the last error is reported
                last = f"{exc.__class__.__name__}: {exc}"
                continue
            headers = {k.lower(): v for k, v in generated.items()}
            identity = self._identity(device, browser, os_name, headers, state, timezone)
            problems = coherence_problems(identity)
            if not problems:
                return identity
            last = "; ".join(problems)
        raise IdentityError(f"no coherent {browser} {device} identity after {MAX_DRAWS} draws: {last}")

    @staticmethod
    def _identity(
        device: str, browser: str, os_name: str, generated: dict[str, str], state: str | None, timezone: str | None
    ) -> Identity:
        ua = generated.get("user-agent", "")
        headers = {"user-agent": ua}
        if browser in CHROMIUM:
            headers.update({k: generated[k] for k in CLIENT_HINTS if k in generated})
        headers["accept-encoding"] = generated.get("accept-encoding") or "gzip, deflate, br"
        headers["accept-language"] = accept_language(browser, state, timezone)
        headers.update(FETCH_HEADERS)
        return Identity(browser, device, os_name, ua, tuple(headers.items()))
