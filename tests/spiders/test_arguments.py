"""Spider arguments (`-a`): parsed and validated once (SpiderParams in spiders/base.py); a bad one
is one line on stderr and a non-zero exit, with no traceback and no crawl run opened."""

from __future__ import annotations

import pytest

from cannaspider.spiders.entry_point_discovery import EntryPointDiscoverySpider
from cannaspider.spiders.products import ProductDiscoverySpider, ProductSpider
from cannaspider.spiders.store_discovery import StoreDiscoverySpider
from cannaspider.units.arguments import SpiderArgumentError, SpiderParams
from tests.helpers import run_scrapy

TARGETED = (ProductSpider, ProductDiscoverySpider, EntryPointDiscoverySpider)


def test_params_are_parsed_once_into_one_object():
    params = SpiderParams.parse("x", frozenset({"dispensary_id", "state", "city"}), {"dispensary_id": "3, 1,2"})
    assert params == SpiderParams(dispensary_ids=(3, 1, 2))
    assert SpiderParams.parse("x", frozenset({"state", "city"}), {"state": "arizona", "city": " Phoenix "}) == (
        SpiderParams(state="AZ", city="Phoenix")
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"state": "ZZ"}, "unknown US state 'ZZ'"),
        ({"dispensary_id": "abc"}, "dispensary_id must be a positive integer"),
        ({"dispensary_id": "0"}, "dispensary_id must be a positive integer"),
        ({"dispensary_id": "1,x"}, "dispensary_id must be a positive integer"),
        ({"dispensary_id": ","}, "dispensary_id must be a positive integer"),
        ({"store": "12"}, "unknown argument store (accepted: dispensary_id, follow, state)"),
        ({"follow": "maybe"}, "follow must be 1 or 0"),
        ({"follow": "1", "state": "AZ"}, "follow=1 drains the queue"),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(raw, message):
    with pytest.raises(SpiderArgumentError) as caught:
        SpiderParams.parse("product_resync", frozenset({"dispensary_id", "state"}), raw)
    assert message in str(caught.value)
    assert str(caught.value).startswith("product_resync: ")
    assert "\n" not in str(caught.value)


def test_runner_arguments_pass_through():
    # Scrapyd adds -a _job=<id> to every crawl it starts
    spider = ProductSpider(state="AZ", _job="abc123")
    assert spider.params == SpiderParams(state="AZ")
    assert spider._job == "abc123"


@pytest.mark.parametrize("spidercls", TARGETED)
def test_targeted_spiders_take_ids_or_a_state_not_both_and_drain_without(spidercls):
    assert spidercls().draining and spidercls(follow="1").params.follow
    with pytest.raises(SpiderArgumentError, match="not both"):
        spidercls(dispensary_id="1", state="AZ")
    assert spidercls(dispensary_id="7").params.dispensary_ids == (7,)
    assert spidercls(state="nv").params.state == "NV"


def test_store_discovery_drains_without_a_state():
    assert StoreDiscoverySpider().draining
    with pytest.raises(SpiderArgumentError, match="-a city needs -a state=XX"):
        StoreDiscoverySpider(city="Phoenix")
    with pytest.raises(SpiderArgumentError, match="unknown argument dispensary_id"):
        StoreDiscoverySpider(state="AZ", dispensary_id="1")
    spider = StoreDiscoverySpider(state="Michigan", city="Detroit")
    assert (spider.state, spider.city) == ("MI", "Detroit")


def test_spider_contracts_need_no_target(monkeypatch):
    # `scrapy check` builds spiders without arguments, with SCRAPY_CHECK set (read by the
    # ContractMode add-on only): no target is required, and the variable changes nothing here
    monkeypatch.setenv("SCRAPY_CHECK", "1")
    assert StoreDiscoverySpider().state is None
    assert ProductSpider().params == SpiderParams()
    with pytest.raises(SpiderArgumentError):  # a wrong argument is still wrong
        ProductSpider(state="ZZ")
    with pytest.raises(SpiderArgumentError, match="not both"):  # and so are targets that do not fit
        ProductSpider(dispensary_id="1", state="AZ")


@pytest.mark.integration
@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("state=ZZ", "error: product_resync: unknown US state 'ZZ'"),
        ("colour=red", "error: product_resync: unknown argument colour"),
        ("dispensary_id=abc", "error: product_resync: dispensary_id must be a positive integer"),
        ("dispensary_id=99999", "error: product_resync: no dispensary with id 99999"),
    ],
)
def test_scrapy_crawl_with_a_bad_argument_exits_non_zero_with_one_line(scrapy_env, sql, argument, message):
    result = run_scrapy("crawl", "product_resync", "-a", argument, env=scrapy_env)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(message), result.stderr[-3000:]
    assert sql("SELECT count(*) FROM crawl_runs") == [(0,)]  # no run opened
