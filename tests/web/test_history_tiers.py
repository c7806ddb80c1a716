"""GET /api/stores/{id}/products/{pid}/history over a history whose older months are archived: the
same JSON as when every month was in PostgreSQL, for every product, whole and cut by a limit."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from cannaspider.history import archive
from tests.history.conftest import MONTHS, seed_history
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def test_the_history_api_answers_the_same_across_both_tiers(api, db, tmp_path):
    keys = seed_history(db)

    def answers() -> list[dict]:
        out = []
        for store, product in keys:
            for limit in (2000, 3, 9, 15):
                url = f"{api.base}/api/stores/{store}/products/{quote(product)}/history?limit={limit}"
                response = http("GET", url)
                assert response.status == 200
                out.append(response.json())
        return out

    before = answers()
    assert [len(a["snapshots"]) for a in before[:4]] == [28, 3, 9, 15]
    for month in MONTHS[:3]:
        assert archive.archive_month(db, month, tmp_path / "cold", require_rolled=False) is not None
    assert answers() == before
    archive.restore_month(db, MONTHS[1])  # a gap: July and September cold, August and October hot
    assert answers() == before
