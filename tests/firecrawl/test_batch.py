"""A batch's life replayed from captured answers: repeated documents, a shrinking total, the
errors endpoint read once the batch is over, `next` never followed."""

from __future__ import annotations

import asyncio
import json

from scrapy.http import TextResponse

from cannaspider.firecrawl.batch import run_batch
from tests.firecrawl.conftest import firecrawl_client, fixture, onpage_config

BASE = "http://127.0.0.1:3002"
A, B, SLOW = (f"http://127.0.0.1:{p}" for p in ("8765/page-a.html", "8765/page-b.html", "8766/slow.html"))


def replay(answers: dict[str, list[dict]]):
    sent: list[tuple[str, str]] = []

    async def download(request):
        sent.append((request.method, request.url))
        queue = answers[f"{request.method} {request.url.removeprefix(BASE)}"]
        body = queue.pop(0) if len(queue) > 1 else queue[0]  # the last answer repeats
        return TextResponse(request.url, status=200, body=json.dumps(body).encode(), encoding="utf-8")

    return download, sent


def test_repeated_documents_shrinking_total_and_errors():
    completed = {**fixture("23_get_in_progress_with_next.json"), "status": "completed", "total": 2}
    completed.pop("next")
    download, sent = replay(
        {
            "POST /v2/batch/scrape": [{"success": True, "id": "ID", "url": "https://x/", "invalidURLs": []}],
            "GET /v2/batch/scrape/ID": [
                fixture("02_get_in_progress_empty.json"),
                fixture("23_get_in_progress_with_next.json"),
                fixture("24_get_next_url_returns_same_docs.json"),
                completed,
            ],
            "GET /v2/crawl/ID/errors": [fixture("13_errors_timeout_proxy_basic.json")],
        }
    )
    client = firecrawl_client(download, BASE)
    budget_s = onpage_config(BASE).budget_s  # FIRECRAWL_BATCH_BUDGET_S
    outcome = asyncio.run(run_batch(client, [SLOW, B, A], poll_interval_s=0.01, budget_s=budget_s))
    assert outcome.polls == 4 and not outcome.gave_up
    assert outcome.pages[A].doc["metadata"]["title"] == "Competitor A - Best Widgets 2025"
    assert outcome.pages[B].doc["metadata"]["title"] == "Competitor B - Widget Guide"
    assert outcome.pages[SLOW].doc is None and outcome.pages[SLOW].error.code == "SCRAPE_TIMEOUT"
    assert all("skip=" not in url for _, url in sent)  # `next` is never followed
    assert sent[-1] == ("GET", f"{BASE}/v2/crawl/ID/errors")


def test_budget_gives_up_and_cancels():
    download, sent = replay(
        {
            "POST /v2/batch/scrape": [{"success": True, "id": "ID", "url": "https://x/", "invalidURLs": []}],
            "GET /v2/batch/scrape/ID": [fixture("23_get_in_progress_with_next.json")],
            "GET /v2/crawl/ID/errors": [{"errors": [], "robotsBlocked": []}],
            "DELETE /v2/batch/scrape/ID": [fixture("19_delete_cancel.json")],
        }
    )
    outcome = asyncio.run(run_batch(firecrawl_client(download, BASE), [A, B, SLOW], poll_interval_s=0.05, budget_s=0.2))
    assert outcome.gave_up and outcome.pages[SLOW].budget_exhausted and not outcome.pages[A].budget_exhausted
    assert 3 <= outcome.polls <= 7  # about budget / interval, never a busy loop
    assert sent[-1] == ("DELETE", f"{BASE}/v2/batch/scrape/ID")
