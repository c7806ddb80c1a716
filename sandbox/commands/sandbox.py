"""`scrapy sandbox`: run the local stand-ins for Dutchie, Firecrawl and a proxy (foreground)."""

from __future__ import annotations

from cannaspider.command_base import CannaspiderCommand


class Command(CannaspiderCommand):
    requires_project = False

    def short_desc(self) -> str:
        return "Run the sandbox (Dutchie-like GraphQL, Firecrawl-like API, forward proxy) on loopback"

    # The sandbox's modules (aiohttp, Pillow) are imported by this command's own parser and run:
    # Scrapy imports every command's module on each start of `scrapy`.
    def add_options(self, parser) -> None:
        from sandbox.cli import add_arguments  # noqa: PLC0415 - a command's start-up time

        super().add_options(parser)
        add_arguments(parser)

    def execute(self, args, opts) -> None:
        from sandbox.cli import sandbox_from  # noqa: PLC0415 - a command's start-up time
        from sandbox.server import serve_forever  # noqa: PLC0415 - a command's start-up time

        serve_forever(sandbox_from(opts), announce=lambda line: print(line, flush=True))
