"""Pages read in parser processes (issue 28, point 15; issue 34's hostile pages): a page past the
deadline, past the memory cap, or whose process dies is `empty` with its reason and the next page
is read by a new process; the event loop runs while a page is read; hostile pages end `empty` or
`ok`, never an exception. Deadlines are small settings, not slow pages."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
from dataclasses import replace

from cannaspider.firecrawl import classify
from cannaspider.firecrawl.batch import PageOutcome
from cannaspider.firecrawl.parser_pool import ParserPool
from sandbox.websites import COMPETITOR_PAGES
from tests.firecrawl.conftest import onpage_config
from tests.firecrawl.hostile import HEADINGS

NORMAL = COMPETITOR_PAGES["en-guide.html"][1]


def document(html: str, **limits) -> classify.Document:
    config = onpage_config(None)
    prepared = classify.prepare(
        PageOutcome("https://h.example/page.html", doc={"rawHtml": html, "metadata": {"statusCode": 200}}),
        replace(config.corpus, **limits),
    )
    assert isinstance(prepared, classify.Document)
    return prepared


def pool_of(**bounds) -> ParserPool:
    """A pool with the project's settings, and `bounds` (timeout_s, max_memory_mb, workers)."""
    config = onpage_config(None)
    return ParserPool(replace(config.parse, **bounds), min_words=config.min_words, limits=config.corpus)


def parser_pids() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.name == "onpage-parser" and p.pid}


def test_a_page_past_the_deadline_is_empty_and_its_process_replaced():
    async def scenario():
        pool = pool_of(timeout_s=1.0, workers=1)
        try:
            first = await pool.read(document(NORMAL))
            before = parser_pids()
            slow = await pool.read(document(HEADINGS))
            gone = before - parser_pids()
            after = await pool.read(document(NORMAL))
            return first, slow, gone, after, parser_pids() - before
        finally:
            pool.close()

    first, slow, gone, after, new = asyncio.run(scenario())
    assert first.status == "ok" and first.corpus is not None
    assert (slow.status, slow.http_status, slow.error) == ("empty", 200, "not read: parsing took longer than 1 s")
    assert slow.onpage is None and slow.corpus is None
    assert len(gone) == 1 and len(new) == 1  # killed, and another process read the next page
    assert (after.status, after.onpage, after.corpus) == (first.status, first.onpage, first.corpus)


def test_the_event_loop_runs_while_a_page_is_read():
    """A timer fires again and again while the slow page is read (it blocked the loop 68 s)."""

    async def scenario():
        pool = pool_of(timeout_s=1.0, workers=1)
        try:
            await pool.read(document(NORMAL))  # the process started: only the reading is timed below
            reading = asyncio.ensure_future(pool.read(document(HEADINGS)))
            ticks = 0
            while not reading.done():
                await asyncio.sleep(0.01)
                ticks += 1
            return ticks, reading.result()
        finally:
            pool.close()

    ticks, verdict = asyncio.run(scenario())
    assert verdict.error == "not read: parsing took longer than 1 s"
    assert ticks >= 10  # a 1 s read leaves room for about 100


def test_a_page_that_needs_more_than_the_memory_cap_is_empty():
    # 1.5 million empty JSON-LD objects: ~240 MB more than a parser process's ~260 MB to decode
    dicts = '<html><body><main><p>hemp</p></main><script type="application/ld+json">['
    dicts += ",".join(["{}"] * 1_500_000) + "]</script></body></html>"

    async def scenario():
        pool = pool_of(max_memory_mb=384, workers=1)
        try:
            return await pool.read(document(dicts)), await pool.read(document(NORMAL))
        finally:
            pool.close()

    big, normal = asyncio.run(scenario())
    assert (big.status, big.error) == ("empty", "not read: parsing needed more than 384 MB")
    assert normal.status == "ok"  # a new process, within the same cap


def test_a_parser_process_that_dies_leaves_its_page_empty():
    async def scenario():
        pool = pool_of(timeout_s=60.0, workers=1)
        try:
            await pool.read(document(NORMAL))
            [pid] = parser_pids()
            reading = asyncio.ensure_future(pool.read(document(HEADINGS)))
            await asyncio.sleep(0.2)
            os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer, or a crash in C, would
            return await reading, await pool.read(document(NORMAL))
        finally:
            pool.close()

    died, normal = asyncio.run(scenario())
    assert (died.status, died.error) == ("empty", "not read: the parser process killed by SIGKILL")
    assert normal.status == "ok"


def test_a_process_that_died_idle_does_not_cost_the_next_page():
    async def scenario():
        pool = pool_of(workers=1)
        try:
            await pool.read(document(NORMAL))
            [pid] = parser_pids()
            os.kill(pid, signal.SIGKILL)
            while pid in parser_pids():  # until the kernel has reaped it
                await asyncio.sleep(0.01)
            return await pool.read(document(NORMAL))
        finally:
            pool.close()

    assert asyncio.run(scenario()).status == "ok"


def test_hostile_pages_end_empty_or_ok_never_a_failure():
    """Issue 34's must-hold pages, built here: each ends with a status and, if not ok, a reason."""
    filler = "<p>" + "hemp oil and cannabidiol " * 40 + "</p>"
    giant = {"@type": "Product", "offers": [{"@type": "Offer", "sku": f"sku-{i}"} for i in range(20_000)]}  # ~0.8 MB
    pages = {
        "50 MB": ('<html lang="en"><body><main><h1>Huge</h1>' + filler * (50_000_000 // len(filler) + 1)),
        "a million nested tags": "<html><body>" + "<div>" * 1_000_000 + "deep" + "</div>" * 1_000_000,
        "script only": "<html><body>" + "<script>var a = 1;</script>" * 100_000 + "</body></html>",
        "giant JSON-LD": '<html lang="en"><body><main><p>Hemp oil.</p></main><script type="application/ld+json">'
        + json.dumps(giant)
        + "</script></body></html>",
        "zero-width text": "<html><body><main><p>"
        + "\u200b\u200c\u200d\ufeff" * 1_000_000
        + "</p></main></body></html>",
    }

    async def scenario():
        pool = pool_of()
        try:
            # the 50 MB page is cut to the first 1 MB before it leaves the crawl process
            docs = {name: document(html, max_html_chars=1_000_000) for name, html in pages.items()}
            verdicts = await asyncio.gather(*(pool.read(doc) for doc in docs.values()))
            return docs, dict(zip(docs, verdicts, strict=True))
        finally:
            pool.close()

    docs, verdicts = asyncio.run(scenario())
    assert len(docs["50 MB"].html) == 1_000_000 and docs["50 MB"].html_chars > 50_000_000
    huge = verdicts["50 MB"]
    assert huge.status == "ok" and huge.corpus.truncated and huge.corpus.html_chars == docs["50 MB"].html_chars
    for name in ("a million nested tags", "script only", "zero-width text"):
        assert (verdicts[name].status, verdicts[name].error) == ("empty", "no usable text on the rendered page"), name
    ld = verdicts["giant JSON-LD"]
    assert ld.status == "ok" and ld.onpage.json_ld_types == ["Product"]
    assert ld.corpus.json_ld == [] and ld.corpus.truncated  # past ONPAGE_CORPUS_MAX_CHARS: not kept
