"""cannaspider/contracts.py's ContractMode add-on: CONTRACT_MODE is True exactly while `scrapy check`
runs (Scrapy sets SCRAPY_CHECK around the crawlers it builds), for every component to read."""

from __future__ import annotations

import scrapy
from scrapy.utils.misc import set_environ

from cannaspider.contracts import CHECK_PRIORITY, ContractMode
from tests.helpers import project_crawler


class _Spider(scrapy.Spider):
    name = "contract_mode"


def test_contract_mode_is_off_in_a_crawl_and_on_under_scrapy_check(monkeypatch):
    monkeypatch.delenv("SCRAPY_CHECK", raising=False)
    # get_crawler applies the add-ons, as a crawl does when it starts
    assert project_crawler(_Spider).settings.getbool("CONTRACT_MODE") is False
    with set_environ(SCRAPY_CHECK="true"):  # as scrapy/commands/check.py sets it
        crawler = project_crawler(_Spider)
    assert crawler.settings.getbool("CONTRACT_MODE") is True
    # above the spiders' custom settings, like the check command's own ITEM_PIPELINES and FEEDS
    assert crawler.settings.getpriority("CONTRACT_MODE") == CHECK_PRIORITY


def test_the_add_on_is_enabled_by_the_project_settings():
    from cannaspider import settings

    assert "cannaspider.contracts.ContractMode" in settings.ADDONS
    assert settings.CONTRACT_MODE is False
    assert ContractMode.from_crawler(project_crawler(_Spider)) is not None
