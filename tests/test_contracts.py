"""cannaspider/contracts.py's ContractMode add-on: CONTRACT_MODE is True exactly while `scrapy check`
runs (Scrapy sets SCRAPY_CHECK around the crawlers it builds), for every component to read."""

from __future__ import annotations

import re
from pathlib import Path

import scrapy
from scrapy.utils.misc import set_environ

import cannaspider
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


def test_only_the_add_on_asks_the_environment_whether_a_check_runs():
    """Contract mode is a setting (issue 21): no production module reads or mentions SCRAPY_CHECK
    but contracts.py, whose add-on turns it into CONTRACT_MODE, and env.py, where every variable
    cannaspider reads is read (its scrapy_check(), which only the add-on calls)."""
    package = Path(cannaspider.__file__).parent
    sources = {str(path.relative_to(package)): path.read_text(encoding="utf-8") for path in package.rglob("*.py")}
    assert "SCRAPY_CHECK" in sources["contracts.py"] and "scrapy_check()" in sources["contracts.py"]
    assert sorted(name for name, text in sources.items() if "SCRAPY_CHECK" in text) == ["contracts.py", "env.py"]
    callers = sorted(name for name, text in sources.items() if re.search(r"\bscrapy_check\b", text))
    assert callers == ["contracts.py", "env.py"]
