"""A browser page without a browser: Chromium missing at CHROMIUM_PATH fails that page only.

Without Chromium (apt locked, a non-root user, a node built without it) the stores whose menu is on
their own website cannot be rendered, but nothing else needs a browser: each browser page fails
with ChromiumNotFound, an IgnoreRequest whose message is the store's `resolution_error`
("Chromium not found at CHROMIUM_PATH (/usr/bin/chromium)"), and the crawl goes on with the other
stores. Checked per request (a stat), not once per crawl: a `-a follow=1` drainer that runs for
weeks renders again once Chromium is installed. The stealth middleware checks before it draws a
browser identity (which reads the Chromium's version, and would stop the crawl); the download
handler checks again for a page that comes to it without the middleware.
"""

from __future__ import annotations

import shutil
import sys

from scrapy.exceptions import IgnoreRequest
from scrapy.settings import BaseSettings

MISSING_STAT = "cannaspider/browser_missing"  # browser pages failed for want of Chromium


class ChromiumNotFound(IgnoreRequest):
    """A browser page that cannot be rendered: no Chromium at CHROMIUM_PATH."""


def browser_path(settings: BaseSettings) -> str:
    """The Chromium scrapy-playwright launches: PLAYWRIGHT_LAUNCH_OPTIONS' executable_path, else CHROMIUM_PATH."""
    path: str = settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS").get("executable_path") or settings.get("CHROMIUM_PATH")
    return path


def chromium_not_found(path: str | None) -> ChromiumNotFound | None:
    """The error for a browser page when there is no executable at `path` (a path, or a name on PATH).
    No path at all (CHROMIUM_PATH set empty): Playwright launches a browser of its own, not ours to check."""
    if not path or shutil.which(path) is not None:
        return None
    return ChromiumNotFound(f"Chromium not found at CHROMIUM_PATH ({path})")


def setup_warning(missing: ChromiumNotFound) -> str:
    """What `./dev` says when there is no Chromium: exactly what a crawl then does."""
    return (
        f"warning: {missing}: only the stores whose menu is on their own website will not resolve, each "
        f'with resolution_error "{missing}"; the other stores resolve and crawl as usual '
        "(install chromium, or set CHROMIUM_PATH)"
    )


def main(argv: list[str]) -> int:
    """`python -m cannaspider.stealth.browser_missing [--quiet]` (./dev setup): exit 1 and, unless
    quiet, the warning on stderr when the project's settings name no Chromium that exists."""
    from scrapy.utils.project import get_project_settings  # noqa: PLC0415 - the command's, not the crawl's

    missing = chromium_not_found(browser_path(get_project_settings()))
    if missing is None:
        return 0
    if "--quiet" not in argv:
        print(setup_warning(missing), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
