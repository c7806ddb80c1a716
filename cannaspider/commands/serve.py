"""`scrapy serve [--host H] [--port P]`: the HTTP service (cannaspider/web) under uvicorn."""

from __future__ import annotations

import argparse
import sys

from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import database_url


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "[--host H] [--port P]"

    def short_desc(self) -> str:
        return "Run the HTTP service (/api/tasks, /api/worker-registry/roles, /openapi.json)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--host", default=None, help="default: API_HOST (127.0.0.1)")
        parser.add_argument("--port", type=int, default=None, help="default: API_PORT (8000)")

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        import uvicorn  # noqa: PLC0415 - the web stack loads for `scrapy serve` only: Scrapy imports every command to list them

        from cannaspider.web.app import create_app  # noqa: PLC0415 - as uvicorn: FastAPI and the routes

        settings = self.settings
        assert settings is not None  # set by Scrapy before run()
        token = settings.get("CANNASPIDER_API_TOKEN") or None
        host = opts.host or settings.get("API_HOST")
        port = opts.port if opts.port is not None else settings.getint("API_PORT")
        if not 0 < port < 65536:
            print(f"error: --port must be between 1 and 65535, got {port}", file=sys.stderr)
            self.exitcode = 2
            return
        if token is None:
            print("serve: CANNASPIDER_API_TOKEN is not set: writes (POST /api/tasks) are refused", flush=True)
        app = create_app(
            database_url(settings),
            token,
            pool_max_size=settings.getint("DB_POOL_MAX_SIZE"),
            settings=settings,
        )
        # uvicorn's access log shows method, path and status: never a header, so never the token
        uvicorn.run(app, host=host, port=port, log_level="info")
