"""Product images: the share of the crawl's image downloads that failed (docs/health.md, "Images").

One image that is slow past IMAGES_DOWNLOAD_TIMEOUT_S, or a CDN's 404, is skipped and asked for
again by the next crawl (docs/images.md, "What is skipped"): one warning line, never a failed
crawl. What says something is wrong is many of them: a share of the images the crawl tried, above
HEALTH_MAX_IMAGE_FAILURE_SHARE, once at least HEALTH_MIN_IMAGE_FAILURES failed (a store with
three images, one of them slow, is not a third of a fleet's images failing).
"""

from __future__ import annotations

from typing import Any

from spidermon import monitors

from cannaspider.monitors.base import HealthMonitor

FAILED_PREFIX = "cannaspider/images_failed/"
STORED = "cannaspider/images_stored"
# skips that are no failed image: never fetched (a URL that is not http(s), a request the
# downloader filtered) or refused by the operator's own IMAGES_MIN_WIDTH/HEIGHT
NOT_FAILURES = frozenset({"scheme", "filtered", "small"})


def image_failures(stats: dict[str, Any]) -> dict[str, int]:
    """Failed images by reason (images_failed/<reason>), the skips that are no failure left out."""
    out: dict[str, int] = {}
    for key, value in stats.items():
        if key.startswith(FAILED_PREFIX) and isinstance(value, int) and value > 0:
            reason = key[len(FAILED_PREFIX) :]
            if reason not in NOT_FAILURES:
                out[reason] = value
    return out


@monitors.name("Images")
class ImageFailuresMonitor(HealthMonitor):
    @monitors.name("failed images within HEALTH_MAX_IMAGE_FAILURE_SHARE")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_image_failures(self) -> None:
        by_reason = image_failures(self.stats)
        failed = sum(by_reason.values())
        if failed < self.settings.getint("HEALTH_MIN_IMAGE_FAILURES"):
            return
        tried = failed + self.stat(STORED)
        share = failed / tried
        limit = self.settings.getfloat("HEALTH_MAX_IMAGE_FAILURE_SHARE")
        reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]))
        self.assertLessEqual(
            share,
            limit,
            f"{failed} of {tried:.0f} images failed ({share:.0%}; HEALTH_MAX_IMAGE_FAILURE_SHARE = {limit:.0%}): "
            f"{reasons}",
        )
