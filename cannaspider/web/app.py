"""The HTTP service: FastAPI validates requests and describes itself at /openapi.json.

    GET  /api/worker-registry/roles   the role registry (cannaspider/tasks/roles.py)
    POST /api/tasks                   an on-demand task (bearer token; see guards.py)
    GET  /api/tasks                   the queue, filtered, newest first, keyset-paged
    GET  /api/tasks/{id}              one task
    GET  /api/keywords/{id}/…         profile, own page (PUT/DELETE: token), gap, progress (keyword_*.py)
    GET  /api/events                  product events, filtered, keyset-paged (events.py)
    GET  /healthz, /readyz, /metrics  probes and Prometheus metrics (probes.py)

Bad input is a 4xx whose `detail` says what is wrong; a database that cannot be reached is a 503.
A write without the token is refused from its headers, before its body is read (guards.WriteGuard),
and no route takes a body over API_MAX_BODY_BYTES (413, from Content-Length or while it streams).
Other parts of the system add their routers to create_app() (image proxy, analytics pages); the
dashboard's pages (/dashboard/) and JSON (/api/stores…, /api/health) are in dashboard*.py.

The service's own front door and API docs are here too, with nothing loaded from another host: `/`
redirects to the dashboard, /docs is Swagger UI and /redoc ReDoc over /openapi.json, their files
served from the fastapi-offline package (install()).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from importlib import resources
from typing import Any

import psycopg
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from scrapy.settings import BaseSettings
from scrapy.utils.project import get_project_settings

from cannaspider.db.errors import first_line
from cannaspider.tasks import queue, roles
from cannaspider.tasks.queue import Task, TaskPage, TaskStatus
from cannaspider.web import (
    brands,
    dashboard,
    dashboard_api,
    events,
    guards,
    jobs,
    keyword_gap,
    keyword_profile,
    market_api,
    probes,
    specials,
)
from cannaspider.web.guards import BodyLimit, WriteGuard, require_token
from cannaspider.web.images import image_router
from cannaspider.web.models import (
    TARGET_NOT_FOUND,
    EnqueueOut,
    RoleName,
    RoleOut,
    TargetNotFoundOut,
    TaskIn,
    refused_with,
)

logger = logging.getLogger(__name__)


def create_app(
    database_url: str,
    api_token: str | None,
    *,
    pool_max_size: int,
    settings: BaseSettings | None = None,
    pool_timeout_s: float = 10.0,
) -> FastAPI:
    """The service's app. A request waits up to `pool_timeout_s` for a database connection (a
    restart ridden out), then is a 503."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = AsyncConnectionPool(
            database_url,
            min_size=1,
            max_size=pool_max_size,
            open=False,
            timeout=pool_timeout_s,
            kwargs={"autocommit": True, "connect_timeout": 10},
            check=AsyncConnectionPool.check_connection,  # the server restarted: no dead connection handed out
        )
        await pool.open(wait=False)  # the service starts (and answers 503) while the database is away
        app.state.pool = pool
        try:
            yield
        finally:
            await pool.close()

    if settings is None:
        settings = get_project_settings()
    app = FastAPI(
        title="cannaspider",
        version="1",
        description="Task queue of the cannaspider crawlers. Reads are open; writes need a bearer token.",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc serve their own assets: install() below
        redoc_url=None,
    )
    # the last added runs first: the token is checked before the size (an unauthenticated upload
    # is a 401 whatever its size), and neither reads the body
    app.add_middleware(BodyLimit, max_body_bytes=settings.getint("API_MAX_BODY_BYTES"))
    app.add_middleware(WriteGuard)
    app.state.api_token = api_token or None
    app.state.settings = settings  # /readyz (the migrations folder), /metrics (ALERTS_MAX_ATTEMPTS)
    app.include_router(dashboard_api.router)
    app.include_router(dashboard.router)
    app.include_router(jobs.router)  # GET /api/jobs: every node's crawl jobs, why the failed ones failed
    # GET /api/keywords/{id}/profile and its dashboard pages (docs/onpage.md)
    app.include_router(keyword_profile.api_router)
    app.include_router(keyword_profile.page_router)
    # our page per locale, its gap against the SERP and the on-page job's progress (docs/onpage.md)
    app.include_router(keyword_gap.api_router)
    app.include_router(keyword_gap.page_router)
    app.include_router(events.router)  # GET /api/events (docs/analytics.md, "Events")
    # GET /img/<path>: the image store, resized on demand (docs/images.md)
    app.include_router(image_router(settings))
    app.include_router(market_api.router)  # canonical brands and products, GET /api/market
    app.include_router(dashboard.market_router)  # /dashboard/market/{state}
    app.include_router(specials.router)  # GET /api/specials (docs/analytics.md, "Specials")
    app.include_router(specials.page_router)  # /dashboard/specials
    app.include_router(brands.router)  # GET /api/brands/{id}/stores, …/market (docs/analytics.md, "Finding a brand")
    app.include_router(brands.page_router)  # /dashboard/brands, /dashboard/brands/{id}
    app.include_router(dashboard.products_router)  # /dashboard/products/{canonical_id}
    app.include_router(probes.router)  # /healthz, /readyz, /metrics (docs/operations.md)
    install(app)  # `/` → the dashboard; /docs, /redoc without a CDN

    for error, handler in guards.HANDLERS.items():
        app.add_exception_handler(error, handler)

    @app.exception_handler(psycopg.OperationalError)
    @app.exception_handler(PoolTimeout)
    async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        logger.warning("database unavailable: %s", first_line(exc))
        return JSONResponse({"detail": "the database is unavailable: try again later"}, status_code=503)

    @app.get("/api/worker-registry/roles", response_model=list[RoleOut], tags=["roles"])
    async def list_roles() -> list[dict[str, Any]]:
        return [role.as_dict() for role in roles.all_roles().values()]

    @app.post(
        "/api/tasks",
        response_model=EnqueueOut,
        status_code=201,
        dependencies=[Depends(require_token)],
        tags=["tasks"],
        responses={
            200: {"model": EnqueueOut, "description": "an identical task was already queued"},
            404: {"model": TargetNotFoundOut, "description": "TargetNotFound: " + TARGET_NOT_FOUND},
            **refused_with(400, 401, 403, 413),
        },
    )
    async def create_task(body: TaskIn, request: Request, response: Response) -> EnqueueOut:
        async with request.app.state.pool.connection() as conn:
            done = await queue.enqueue(
                conn,
                body.role,
                platform=body.platform,
                priority=body.priority,
                max_attempts=body.max_attempts,
                **body.target(),
            )
        if not done.created:
            response.status_code = 200
        return EnqueueOut(task=done.task, reused=not done.created)

    @app.get("/api/tasks", response_model=TaskPage, tags=["tasks"])
    async def list_tasks(
        request: Request,
        role: RoleName | None = None,
        status: TaskStatus | None = None,
        dispensary_id: int | None = Query(None, ge=1),
        limit: int = Query(50, ge=1, le=500),
        before_id: int | None = Query(None, ge=1, description="from a previous page's next_before_id"),
    ) -> TaskPage:
        async with request.app.state.pool.connection() as conn:
            page = await queue.list_tasks(
                conn,
                role=role.value if role is not None else None,
                status=status,
                dispensary_id=dispensary_id,
                limit=limit,
                before_id=before_id,
            )
        return page

    @app.get("/api/tasks/{task_id}", response_model=Task, tags=["tasks"], responses=refused_with(404))
    async def get_task(task_id: int, request: Request) -> Task:
        async with request.app.state.pool.connection() as conn:
            task = await queue.get(conn, task_id)
        if task is None:
            raise HTTPException(404, f"task {task_id} does not exist")
        return task

    return app


ASSETS = "/docs-assets"
# ReDoc's bundle shows its "powered by" logo from Redocly's CDN (a headless browser caught the
# request: tests/web/test_docs_browser.py): our copy names our own icon instead
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


def install(app: FastAPI) -> None:
    """The redirect, the two docs pages and their files, on `app`."""
    app.include_router(docs_router)
    app.mount(ASSETS, StaticFiles(directory=str(resources.files("fastapi_offline") / "static")), name="docs-assets")


docs_router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _redoc_js() -> bytes:
    bundle = (resources.files("fastapi_offline") / "static" / "redoc.standalone.js").read_bytes()
    return bundle.replace(REDOC_CDN_LOGO, f"{ASSETS}/favicon.png".encode())


@docs_router.get(f"{ASSETS}/redoc.standalone.js")  # before the static files (install() includes this first)
async def redoc_js() -> Response:
    return Response(_redoc_js(), media_type="text/javascript", headers={"cache-control": "max-age=86400"})


@docs_router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboard/", status_code=307)


@docs_router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="cannaspider API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon.png",
        # no badge that sends the spec to swagger.io's validator
        swagger_ui_parameters={"validatorUrl": None},
    )


@docs_router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="cannaspider API",
        redoc_js_url=f"{ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS}/favicon.png",
        with_google_fonts=False,
    )
