"""What every Dutchie spider shares (spiders/base.py): the download handlers of the schemes a crawl
never fetches are off, so no URL out of a payload can read a local file, bypass the store's proxy
(ftp) or send a signed S3 request (docs/images.md)."""

from __future__ import annotations

import asyncio

import pytest
import scrapy
from scrapy.core.downloader.handlers import DownloadHandlers
from scrapy.exceptions import NotSupported

from cannaspider.spiders.base import UNUSED_SCHEMES
from cannaspider.spiders.entry_point_discovery import EntryPointDiscoverySpider
from cannaspider.spiders.products import ProductDiscoverySpider, ProductSpider
from cannaspider.spiders.store_discovery import StoreDiscoverySpider
from tests.helpers import project_crawler

DUTCHIE_SPIDERS = (ProductSpider, ProductDiscoverySpider, StoreDiscoverySpider, EntryPointDiscoverySpider)


def download(spidercls: type[scrapy.Spider], url: str) -> scrapy.http.Response:
    crawler = project_crawler(spidercls)
    crawler.spider = scrapy.Spider("probe")  # the handlers only need one to exist
    handlers = DownloadHandlers(crawler)
    return asyncio.run(handlers.download_request_async(scrapy.Request(url)))


def urls(tmp_path) -> dict[str, str]:
    local = tmp_path / "local.png"
    local.write_bytes(b"\x89PNG local file")
    return {
        "file": local.as_uri(),
        "data": "data:,local",
        "ftp": "ftp://127.0.0.1:1/x.png",
        "s3": "s3://node-bucket/x.png",
    }


@pytest.mark.parametrize("spidercls", DUTCHIE_SPIDERS, ids=lambda c: c.name)
def test_the_dutchie_spiders_cannot_download_file_data_ftp_or_s3(spidercls, tmp_path):
    assert set(urls(tmp_path)) == set(UNUSED_SCHEMES)
    for scheme, url in urls(tmp_path).items():
        with pytest.raises(NotSupported, match=f"Unsupported URL scheme '{scheme}'"):
            download(spidercls, url)


def test_a_spider_of_scrapy_would_read_the_local_file(tmp_path):
    """What the Dutchie spiders are protected from: Scrapy's default handlers read file: and data:."""
    assert download(scrapy.Spider, urls(tmp_path)["file"]).body == b"\x89PNG local file"
    assert download(scrapy.Spider, "data:,local").body == b"local"


@pytest.mark.parametrize("spidercls", DUTCHIE_SPIDERS, ids=lambda c: c.name)
def test_their_http_handlers_are_still_the_projects(spidercls):
    handlers = project_crawler(spidercls).settings.getdict("DOWNLOAD_HANDLERS")
    assert handlers["http"] and handlers["https"] and handlers["http"] == handlers["https"]
    assert handlers["http"].startswith("cannaspider.stealth.")
