"""`scrapy check`: every spider callback's contracts, run against the sandbox."""

from __future__ import annotations

import pytest

from tests.helpers import run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_scrapy_check_passes_against_the_sandbox(scrapy_env):
    listed = run_scrapy("check", "-l", env=scrapy_env)
    for method in ("parse_products", "parse_dispensary", "parse_search", "parse_website"):
        assert method in listed.stdout
    result = run_scrapy("check", env=scrapy_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stderr
    ran = [line for line in result.stderr.splitlines() if line.startswith("Ran ")]
    assert ran and int(ran[0].split()[1]) >= 6


def test_scrapy_check_fails_when_the_service_misbehaves(scrapy_env, sandbox):
    sandbox.faults({"kind": "graphql_errors"})
    result = run_scrapy("check", "product_resync", env=scrapy_env)
    assert result.returncode != 0
    assert "FAILED" in result.stderr
