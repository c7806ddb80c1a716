"""The role registry (cannaspider/tasks/roles.py), built from the spiders' declarations: the chain
of each role comes from its `Role` (units/role.py, `Chain`), nowhere else."""

from __future__ import annotations

import re

import pytest

from cannaspider.spiders.analytics_refresh import AnalyticsRefreshSpider
from cannaspider.tasks import roles
from cannaspider.units.role import Chain, NoTarget, Role


def test_the_chain_is_read_from_the_spiders_declarations_in_chain_order():
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
    assert declared["store_discovery"].as_dict()["chains_to"] == "entry_point_discovery"


def test_a_chain_to_a_role_no_spider_declares_is_refused_when_the_registry_is_built(monkeypatch):
    class Orphan(AnalyticsRefreshSpider):
        name = "orphan"
        role = Role("orphan", "Orphan", "chains to nothing declared", NoTarget, chain=Chain("nowhere", "SELECT 1"))

    monkeypatch.setattr(roles, "_spiders", lambda: {"analytics_refresh": AnalyticsRefreshSpider, "orphan": Orphan})
    roles.all_roles.cache_clear()
    try:
        with pytest.raises(TypeError, match="role 'orphan' chains to 'nowhere', which no spider declares"):
            roles.all_roles()
    finally:
        monkeypatch.undo()
        roles.all_roles.cache_clear()
    assert "orphan" not in roles.all_roles()
