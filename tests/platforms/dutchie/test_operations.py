"""The operations' default persisted-query hashes are real, documented values, never invented."""

from __future__ import annotations

import re

import pytest

from cannaspider.platforms.dutchie.operations import DEFAULT_PERSISTED_HASHES, KNOWN_PERSISTED_HASHES, QUERIES
from tests.helpers import ROOT

SHA256_HEX = re.compile(r"[0-9a-f]{64}")
DUTCHIE_DOC = ROOT / "docs" / "dutchie.md"


def test_every_operation_has_a_default_hash_and_a_full_query_to_fall_back_on():
    assert set(DEFAULT_PERSISTED_HASHES) == set(QUERIES) == set(KNOWN_PERSISTED_HASHES)
    for operation, query in QUERIES.items():
        assert re.match(rf"\s*query {operation}\b", query), operation


@pytest.mark.parametrize("operation", sorted(KNOWN_PERSISTED_HASHES))
def test_every_known_hash_is_64_lowercase_hex_and_documented(operation):
    doc = DUTCHIE_DOC.read_text()
    for sha, seen in KNOWN_PERSISTED_HASHES[operation]:
        assert SHA256_HEX.fullmatch(sha), f"{operation}: {sha!r} is not 64 lowercase hex"
        assert sha in doc, f"{operation}: {sha} is not listed in docs/dutchie.md"
        assert re.match(r"\d{4}(-\d{2})?\b", seen), f"{operation}: {sha} has no date ({seen!r})"


def test_the_default_is_the_newest_hash_seen():
    for operation, seen in KNOWN_PERSISTED_HASHES.items():
        assert DEFAULT_PERSISTED_HASHES[operation] == seen[0][0]
        dates = [when[:7] for _, when in seen]
        assert dates == sorted(dates, reverse=True), f"{operation}: not newest first"
