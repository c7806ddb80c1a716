"""The service's own front door and API docs, with nothing loaded from another host:

    GET /                  redirects to the dashboard
    GET /docs              Swagger UI over /openapi.json
    GET /redoc             ReDoc over /openapi.json
    GET /docs-assets/...   their JavaScript, CSS and icon, from the fastapi-offline package

FastAPI's own /docs pages load Swagger UI and ReDoc from a CDN (and ReDoc's fonts from Google),
which leaves a blank page on a machine without internet; create_app() turns them off
(docs_url=None, redoc_url=None) and includes this router instead.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
# ReDoc's bundle shows its "powered by" logo from Redocly's CDN (a headless browser caught the
# request: tests/web/test_docs_browser.py): our copy names our own icon instead
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


def install(app: FastAPI) -> None:
    """The redirect, the two docs pages and their files, on `app`."""
    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=str(resources.files("fastapi_offline") / "static")), name="docs-assets")


router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _redoc_js() -> bytes:
    bundle = (resources.files("fastapi_offline") / "static" / "redoc.standalone.js").read_bytes()
    return bundle.replace(REDOC_CDN_LOGO, f"{ASSETS}/favicon.png".encode())


@router.get(f"{ASSETS}/redoc.standalone.js")  # before the static files (install() includes this first)
async def redoc_js() -> Response:
    return Response(_redoc_js(), media_type="text/javascript", headers={"cache-control": "max-age=86400"})


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboard/", status_code=307)


@router.get("/docs")
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


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="cannaspider API",
        redoc_js_url=f"{ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS}/favicon.png",
        with_google_fonts=False,
    )
