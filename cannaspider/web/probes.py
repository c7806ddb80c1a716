"""The probes and the metrics of the HTTP service (docs/operations.md, "Metrics and probes"):

GET /healthz   the process answers (a liveness probe: no database involved)
GET /readyz    the database is reachable and every migration of this checkout is applied
               (a readiness probe: 503 with the reason otherwise)
GET /metrics   the fleet's metrics in Prometheus' text format, read from PostgreSQL
               (cannaspider/metrics/fleet.py)
"""

from __future__ import annotations

import logging

import psycopg
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, Field
from scrapy.settings import BaseSettings

from cannaspider.db import migrations
from cannaspider.db.errors import first_line
from cannaspider.metrics import fleet

logger = logging.getLogger(__name__)

router = APIRouter(tags=["probes"])


class ProbeOut(BaseModel):
    status: str = Field(description="'ok', or 'unavailable' (503)")
    detail: str | None = Field(None, description="why the service is not ready")


def _settings(request: Request) -> BaseSettings:
    settings: BaseSettings = request.app.state.settings
    return settings


@router.get("/healthz", response_model=ProbeOut)
async def healthz() -> ProbeOut:
    return ProbeOut(status="ok", detail=None)


@router.get("/readyz", response_model=ProbeOut, responses={503: {"model": ProbeOut, "description": "not ready"}})
async def readyz(request: Request) -> JSONResponse:
    try:
        # 5 s, or the pool's own wait when shorter (create_app's pool_timeout_s): never longer than a request's
        pool = request.app.state.pool
        async with pool.connection(timeout=min(5.0, pool.timeout)) as conn:
            rows = await (await conn.execute("SELECT version FROM schema_migrations")).fetchall()
    except psycopg.errors.UndefinedTable:
        return _unready("the database has no schema yet: run `scrapy migrate`")
    except (psycopg.OperationalError, PoolTimeout) as exc:
        logger.warning("readyz: database unavailable: %s", first_line(exc))
        return _unready("the database is unreachable")
    missing = migrations.not_applied({row[0] for row in rows}, _settings(request))
    if missing:
        names = ", ".join(m.path.name for m in missing)
        return _unready(f"the database lacks migration(s) {names}: run `scrapy migrate`")
    return JSONResponse(ProbeOut(status="ok", detail=None).model_dump())


def _unready(detail: str) -> JSONResponse:
    return JSONResponse(ProbeOut(status="unavailable", detail=detail).model_dump(), status_code=503)


@router.get("/metrics", include_in_schema=False)  # Prometheus' text format, not the JSON API
async def metrics(request: Request) -> Response:
    settings = _settings(request)
    async with request.app.state.pool.connection() as conn:
        families = await fleet.collect(conn, max_attempts=settings.getint("ALERTS_MAX_ATTEMPTS"))
    return Response(fleet.exposition(families), media_type=CONTENT_TYPE_LATEST)
