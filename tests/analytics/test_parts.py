"""The split of the market roll's states into parts (cannaspider/analytics/parts.py)."""

from __future__ import annotations

import pytest

from cannaspider.analytics.parts import needs_url, split


def test_the_heaviest_keys_go_to_the_lightest_parts():
    weights = {"AZ": 200, "MI": 500, "NV": 100, "CA": 300, "": 0}
    # MI 500 | CA 300 + AZ 200; the tie goes to the first; the empty key to the lighter
    assert split(weights, 2) == [["MI", "NV"], ["CA", "AZ", ""]]
    assert split(weights, 3) == [["MI"], ["CA", ""], ["AZ", "NV"]]


def test_no_more_parts_than_keys_and_none_empty():
    assert split({"AZ": 1, "MI": 1}, 4) == [["AZ"], ["MI"]]
    assert split({"AZ": 0}, 1) == [["AZ"]]
    assert split({}, 2) == []


def test_a_split_step_needs_the_url_for_its_other_connections():
    assert needs_url("dbname=x") == "dbname=x"
    with pytest.raises(ValueError, match="needs the database URL"):
        needs_url(None)
