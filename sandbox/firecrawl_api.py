"""A Firecrawl-like v2 batch-scrape API, as a self-hosted instance really behaves
(docs/firecrawl.md): strict request schema, ignoreInvalidURLs, `proxy` semantics, failed
pages removed from `total` and listed at /v2/crawl/{id}/errors, `next` that ignores `skip`,
cancel, 404 for unknown jobs. Pages are fetched over loopback and their inline
insertAdjacentHTML scripts applied, standing in for the Playwright renderer.

Switches (POST /_sandbox/state): an API key to require, a Redis-down instance (500s), a queue
wait before workers pick pages up, API calls that stall (a network timeout for the client), a
hostile instance whose every answer is JSON nested 5000 levels deep, and a reset to the defaults.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from sandbox.faults import deeply_nested_json

ALLOWED_KEYS = {
    "urls",
    "formats",
    "onlyMainContent",
    "maxAge",
    "timeout",
    "proxy",
    "ignoreInvalidURLs",
    "waitFor",
    "headers",
    "includeTags",
    "excludeTags",
    "mobile",
    "skipTlsVerification",
    "removeBase64Images",
    "blockAds",
    "storeInCache",
    "location",
    "actions",
    "parsers",
    "maxConcurrency",
    "zeroDataRetention",
    "webhook",
    "appendToId",
    "fastMode",
    "useMock",
    "integration",
    "origin",
}
WORKERS = 8
INSERT_SCRIPT = re.compile(r"document\.body\.insertAdjacentHTML\('beforeend',\s*'(?P<html>(?:[^'\\]|\\.)*)'\);?")
REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
TLD = re.compile(r"\.[a-z]{2,63}$", re.I)
FILE_EXT = re.compile(r"\.[A-Za-z0-9]{1,8}$")


def _bad_request(details: list[dict]) -> web.Response:
    return web.json_response(
        {"success": False, "code": "BAD_REQUEST", "error": "Bad Request", "details": details}, status=400
    )


def url_is_valid(url: object) -> bool:
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    host = parts.hostname
    if "." not in host:
        return False
    return bool(TLD.search(host)) or bool(FILE_EXT.search(parts.path))


def _render(html: str) -> str:
    """Apply the page's insertAdjacentHTML calls, as a browser would before we read the DOM."""
    inserted = [m.group("html").replace("\\'", "'") for m in INSERT_SCRIPT.finditer(html)]
    if not inserted:
        return html
    return html.replace("</body>", "".join(inserted) + "</body>") if "</body>" in html else html + "".join(inserted)


def _title(html: str) -> str | None:
    m = re.search(r"<title>(.*?)</title>", html, re.S | re.I)
    return m.group(1).strip() if m and m.group(1).strip() else None


def _has_text(html: str) -> bool:
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S | re.I)
    return bool(re.sub(r"<[^>]+>|\s+", "", text))


@dataclass
class Job:
    id: str
    urls: list[str]
    timeout_ms: int
    proxy: str
    created: float = field(default_factory=time.time)
    status: str = "scraping"
    docs: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    failed: int = 0
    tasks: list[asyncio.Task] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    finished_at: float | None = None


class FirecrawlState:
    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.api_key: str | None = None  # None: accept anything (no DB auth)
        self.down = False  # Redis down: 500 UNKNOWN_ERROR
        self.hostile = False  # every API answer nests NESTING_DEPTH arrays (json.loads: RecursionError)
        self.queue_delay = 0.0  # seconds a page waits for a worker
        self.stall_seconds = 0.0  # the next `stall_count` API calls answer this late
        self.stall_count = 0
        self.semaphore = asyncio.Semaphore(WORKERS)

    def reset(self) -> None:
        for job in self.jobs.values():
            for task in job.tasks:
                task.cancel()
        self.jobs.clear()
        self.api_key, self.down, self.queue_delay, self.hostile = None, False, 0.0, False
        self.stall_seconds, self.stall_count = 0.0, 0


FIRECRAWL = web.AppKey("firecrawl", FirecrawlState)


def _auth_failed(request: web.Request, state: FirecrawlState) -> web.Response | None:
    if state.hostile:
        return web.Response(text=deeply_nested_json(), content_type="application/json")
    if state.down:
        return web.json_response(
            {"success": False, "code": "UNKNOWN_ERROR", "error": "An unexpected error occurred."}, status=500
        )
    if state.api_key is not None and request.headers.get("Authorization") != f"Bearer {state.api_key}":
        return web.json_response({"success": False, "error": "Unauthorized: Invalid token"}, status=401)
    return None


async def start_batch(request: web.Request) -> web.Response:
    state: FirecrawlState = request.app[FIRECRAWL]
    if (denied := _auth_failed(request, state)) is not None:
        return denied
    try:
        body = await request.json()
    except ValueError:
        return _bad_request([{"code": "invalid_json", "message": "Body is not valid JSON", "path": []}])
    if not isinstance(body, dict):
        return _bad_request([{"code": "invalid_type", "message": "Expected object", "path": []}])
    unknown = sorted(set(body) - ALLOWED_KEYS)
    if unknown:
        return _bad_request(
            [
                {
                    "code": "unrecognized_keys",
                    "keys": unknown,
                    "path": [],
                    "message": "Unrecognized key in body -- please review the v2 API "
                    "documentation for request body changes",
                }
            ]
        )
    urls = body.get("urls")
    if not isinstance(urls, list) or not urls:
        return _bad_request([{"code": "invalid_type", "message": "urls must be a non-empty array", "path": ["urls"]}])
    timeout = int(body.get("timeout", 30000))
    wait_for = int(body.get("waitFor", 0))
    if wait_for > timeout / 2:
        return _bad_request(
            [{"code": "custom", "message": "waitFor must not exceed half of timeout", "path": ["waitFor"]}]
        )
    proxy = body.get("proxy", "auto")
    if proxy not in ("basic", "auto", "stealth"):
        return _bad_request([{"code": "invalid_enum_value", "message": "Invalid proxy", "path": ["proxy"]}])
    invalid = [u for u in urls if not url_is_valid(u)]
    if invalid and not body.get("ignoreInvalidURLs"):
        index = urls.index(invalid[0])
        return _bad_request(
            [
                {
                    "code": "custom",
                    "message": "URL must have a valid top-level domain or be a valid path",
                    "path": ["urls", index],
                }
            ]
        )
    valid = [u for u in urls if url_is_valid(u)]
    if proxy == "auto" and timeout == 30000:
        timeout = 120000  # what the real server silently does
    job = Job(id=str(uuid.uuid4()), urls=valid, timeout_ms=timeout, proxy=proxy, pending=list(valid))
    state.jobs[job.id] = job
    for url in valid:
        job.tasks.append(asyncio.create_task(_scrape(state, job, url)))
    host = request.host
    return web.json_response(
        {"success": True, "id": job.id, "url": f"https://{host}/v2/batch/scrape/{job.id}", "invalidURLs": invalid}
    )


def _fail(job: Job, url: str, code: str, message: str) -> None:
    job.failed += 1
    job.errors.append(
        {
            "id": str(uuid.uuid4()),
            "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "url": url,
            "code": code,
            "error": message,
        }
    )


ALL_FAILED = (
    "All scraping engines failed! -- Double check the URL to make sure it's not broken. "
    "If the issue persists, contact us at help@firecrawl.com."
)


async def _scrape(state: FirecrawlState, job: Job, url: str) -> None:
    try:
        await asyncio.sleep(state.queue_delay)
        async with state.semaphore:
            if job.status == "cancelled" and url in job.pending:
                job.pending.remove(url)
                job.failed += 1
                return
            await asyncio.wait_for(_fetch_into(job, url), timeout=job.timeout_ms / 1000)
    except TimeoutError:
        _fail(job, url, "SCRAPE_TIMEOUT", "Scrape timed out")
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - refused, DNS, non-loopback target: as Firecrawl answers them
        _fail(job, url, "SCRAPE_ALL_ENGINES_FAILED", ALL_FAILED)
    finally:
        if url in job.pending:
            job.pending.remove(url)
        if not job.pending and job.status == "scraping":
            job.status = "completed"
        if not job.pending:
            job.finished_at = time.time()


async def _fetch_into(job: Job, url: str) -> None:
    host = urlsplit(url).hostname or ""
    try:
        if not ipaddress.ip_address(host).is_loopback:
            raise ConnectionError("sandbox fetches loopback only")
    except ValueError as exc:
        raise ConnectionError("sandbox fetches loopback only") from exc
    async with aiohttp.ClientSession() as session:
        async with session.get(url, allow_redirects=True) as resp:
            html = await resp.text(errors="replace")
            status = resp.status
            ctype = resp.headers.get("content-type", "text/html").split(";")[0]
    if status in (401, 403, 429) and job.proxy == "auto":
        # the stealth retry needs an engine self-hosted lacks: the page fails, its status is lost
        _fail(job, url, "SCRAPE_ALL_ENGINES_FAILED", ALL_FAILED)
        return
    if status == 200 and not html.strip():
        _fail(job, url, "SCRAPE_ALL_ENGINES_FAILED", ALL_FAILED)
        return
    rendered = _render(html)
    meta: dict = {
        "ogLocaleAlternate": [],
        "scrapeId": str(uuid.uuid4()),
        "sourceURL": url,
        "url": str(url),
        "statusCode": status,
        "contentType": ctype,
        "proxyUsed": "basic",
        "creditsUsed": 1,
    }
    if (title := _title(rendered)) is not None:
        meta["title"] = title
    if (lang := re.search(r"<html[^>]*lang=\"([^\"]+)\"", rendered)) is not None:
        meta["language"] = lang.group(1)
    if (desc := re.search(r"<meta name=\"description\" content=\"([^\"]*)\"", rendered)) is not None:
        meta["description"] = desc.group(1)
    if status != 200:
        meta["error"] = REASONS.get(status, "Error")
    job.docs.append({"rawHtml": rendered, "metadata": meta})


def _job_or_404(request: web.Request) -> Job | web.Response:
    """The job named in the path, or the response to send instead (auth failure, 404)."""
    state: FirecrawlState = request.app[FIRECRAWL]
    if (denied := _auth_failed(request, state)) is not None:
        return denied
    job = state.jobs.get(request.match_info["id"])
    if job is None or (job.finished_at and time.time() - job.finished_at > 3600):
        return web.json_response({"success": False, "error": "Job not found"}, status=404)
    return job


async def get_batch(request: web.Request) -> web.Response:
    job = _job_or_404(request)
    if isinstance(job, web.Response):
        return job
    expires = datetime.fromtimestamp(job.created, UTC) + timedelta(days=1)
    body = {
        "success": True,
        "status": job.status,
        "completed": len(job.docs),
        "total": len(job.urls) - job.failed,
        "creditsUsed": len(job.docs),
        "expiresAt": expires.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    if job.pending:
        # present on every poll while running; self-hosted ignores `skip`
        body["next"] = f"https://{request.host}/v2/batch/scrape/{job.id}?skip={len(job.docs)}"
    body["data"] = list(job.docs)
    return web.json_response(body)


async def cancel_batch(request: web.Request) -> web.Response:
    job = _job_or_404(request)
    if isinstance(job, web.Response):
        return job
    job.status = "cancelled"
    return web.json_response({"status": "cancelled"})


async def job_errors(request: web.Request) -> web.Response:
    job = _job_or_404(request)
    if isinstance(job, web.Response):
        return job
    return web.json_response({"errors": list(job.errors), "robotsBlocked": []})


async def not_found(request: web.Request) -> web.Response:
    return web.Response(
        text=f"<!DOCTYPE html><html><body><pre>Cannot {request.method} {request.path}</pre></body></html>",
        status=404,
        content_type="text/html",
    )


@web.middleware
async def stall(request: web.Request, handler):
    """The next `stall_count` API calls wait `stall_seconds` first: a client sees a network timeout."""
    state: FirecrawlState = request.app[FIRECRAWL]
    if request.path.startswith("/v2/") and state.stall_count > 0:
        state.stall_count -= 1
        await asyncio.sleep(state.stall_seconds)
    return await handler(request)


async def control(request: web.Request) -> web.Response:
    """Sandbox switches: an API key to require, a Redis-down instance, queue wait before workers,
    stalled API calls ({"stall": {"seconds": S, "count": N}}), {"reset": true}."""
    state: FirecrawlState = request.app[FIRECRAWL]
    body = await request.json()
    if body.get("reset"):
        state.reset()
    if isinstance(body.get("stall"), dict):
        state.stall_seconds = float(body["stall"].get("seconds", 0))
        state.stall_count = int(body["stall"].get("count", 1))
    if "api_key" in body:
        state.api_key = body["api_key"]
    state.down = bool(body.get("down", state.down))
    state.hostile = bool(body.get("hostile", state.hostile))
    state.queue_delay = float(body.get("queue_delay", state.queue_delay))
    return web.json_response(
        {
            "api_key_required": state.api_key is not None,
            "down": state.down,
            "hostile": state.hostile,
            "queue_delay": state.queue_delay,
            "stall": {"seconds": state.stall_seconds, "count": state.stall_count},
            "jobs": len(state.jobs),
            # each job's [created, finished] (epoch seconds; finished null while it runs): a test
            # tells jobs that ran at once from jobs that ran one after another without a clock bound
            "job_spans": [[job.created, job.finished_at] for job in state.jobs.values()],
        }
    )


def make_app() -> web.Application:
    app = web.Application(middlewares=[stall])
    app[FIRECRAWL] = FirecrawlState()
    app.router.add_post("/v2/batch/scrape", start_batch)
    app.router.add_get("/v2/batch/scrape/{id}", get_batch)
    app.router.add_delete("/v2/batch/scrape/{id}", cancel_batch)
    app.router.add_get("/v2/crawl/{id}/errors", job_errors)
    app.router.add_post("/_sandbox/state", control)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
