"""Image and logo URLs we may fetch: http(s) only (docs/images.md)."""

from __future__ import annotations

# Only http(s) URLs are fetched (through the store's proxy: docs/images.md). Any other scheme in a
# payload (file:, ftp:, s3:, data:, …) would have Scrapy read a local file and publish it, dial
# around the proxy, or sign an S3 request with the node's AWS keys: it is dropped here, counted
# (REFUSED_URLS; the normalize pipeline makes it the stat cannaspider/image_urls_refused) and never
# logged with anything but the count.
from cannaspider.storable.degraded import Tally

HTTP_SCHEMES = ("https://", "http://")
REFUSED_URLS = Tally()  # image and logo URLs dropped for their scheme by this process


def fetchable(url: str) -> bool:
    if url.startswith(HTTP_SCHEMES) or url[:8].lower().startswith(HTTP_SCHEMES):
        return True
    REFUSED_URLS.count += 1
    return False
