"""/docs and /redoc in a real headless Chromium: they render from the service's own files, and no
request leaves 127.0.0.1 (ReDoc's web worker is a blob: URL of the page's own origin)."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright.sync_api")

from tests.web.test_dashboard import browser, recording_page, shot  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@pytest.fixture
def docs_page(browser, tmp_path):  # noqa: F811 - the imported browser fixture, as pytest passes it
    with recording_page(browser, tmp_path, viewport={"width": 1280, "height": 900}) as (pg, requests):
        yield pg
    outside = [u for u in requests if not u.removeprefix("blob:").startswith("http://127.0.0.1:")]
    assert not outside, outside


def test_swagger_ui_and_redoc_render_offline(api, docs_page):
    page = docs_page
    page.goto(api.base + "/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "cannaspider" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector('[data-path="/api/brands"]', timeout=30_000)  # the operations, from /openapi.json
    shot(page, "docs")
    page.goto(api.base + "/redoc")
    page.wait_for_selector("h1", timeout=30_000)
    assert "cannaspider" in page.inner_text("h1")
    shot(page, "redoc")
    page.goto(api.base + "/")
    assert page.url == api.base + "/dashboard/"
