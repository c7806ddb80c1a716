"""The role table (cannaspider/tasks/roles.py), declared as data beneath the queue: the chain of each
role comes from its `Role` (`Chain`), nowhere else; every role is done by the spider of its name and
every role spider refers to its role in the table."""

from __future__ import annotations

import re

import pytest
from scrapy.spiderloader import SpiderLoader
from scrapy.utils.project import get_project_settings

from cannaspider.tasks import roles
from cannaspider.tasks.roles import Chain, NoTarget, Role, StoreTarget


def test_the_chain_is_read_from_the_table_in_chain_order():
    declared = roles.all_roles()
    order = list(declared)  # a role before those it chains to
    assert order.index("store_discovery") < order.index("entry_point_discovery") < order.index("product_discovery")
    assert {name: role.chains_to for name, role in declared.items() if role.chains_to} == {
        "store_discovery": "entry_point_discovery",
        "entry_point_discovery": "product_discovery",
    }
    for role in declared.values():
        if role.chain is not None:  # the parameters tasks/queue/outcomes.py passes, and only those
            assert set(re.findall(r"%\((\w+)\)s", role.chain.sql)) == {"ids", "child", "priority"}
            # the queue appends its duplicate-task rule (queue/model.py): a chain never writes its own
            assert "ON CONFLICT" not in role.chain.sql
    assert declared["store_discovery"].as_dict()["chains_to"] == "entry_point_discovery"


def test_a_chain_to_an_undeclared_role_is_refused_when_the_table_is_built():
    orphan = Role("orphan", "Orphan", "chains to nothing declared", NoTarget, chain=Chain("nowhere", "SELECT 1"))
    with pytest.raises(TypeError, match="role 'orphan' chains to 'nowhere', which is not declared"):
        roles.registry([roles.get("analytics_refresh"), orphan])
    first = Role("first", "First", "the first run of nothing declared", StoreTarget, first_of="nowhere")
    with pytest.raises(TypeError, match="role 'first' is the first run of 'nowhere', which is not declared"):
        roles.registry([first])
    with pytest.raises(TypeError, match="role 'analytics_refresh' is declared twice"):
        roles.registry([roles.get("analytics_refresh"), roles.get("analytics_refresh")])
    assert "orphan" not in roles.all_roles()


def test_every_role_has_the_spider_of_its_name_and_each_spider_refers_to_its_role():
    # loading spiders is a crawl's business (and this test's): the queue's side only reads the table
    loader = SpiderLoader.from_settings(get_project_settings())
    spiders = {name: loader.load(name) for name in loader.list()}
    assert set(roles.names()) <= set(spiders)
    for name in roles.names():
        assert spiders[name].role is roles.get(name)
    with_role = {name for name, spider in spiders.items() if isinstance(getattr(spider, "role", None), Role)}
    assert with_role == set(roles.names())


def test_product_discovery_is_the_first_run_of_product_resync_and_shares_its_work():
    assert roles.get("product_discovery").first_of == "product_resync"
    assert sorted(roles.same_work("product_resync")) == ["product_discovery", "product_resync"]
    assert roles.same_work("product_discovery") == ("product_discovery",)
