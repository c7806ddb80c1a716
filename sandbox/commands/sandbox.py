"""`scrapy sandbox`: run the local stand-ins for Dutchie, Firecrawl and a proxy (foreground)."""

from __future__ import annotations

from cannaspider.command_base import CannaspiderCommand
from sandbox.cli import add_arguments, sandbox_from
from sandbox.server import serve_forever


class Command(CannaspiderCommand):
    requires_project = False

    def short_desc(self) -> str:
        return "Run the sandbox (Dutchie-like GraphQL, Firecrawl-like API, forward proxy) on loopback"

    def add_options(self, parser) -> None:
        super().add_options(parser)
        add_arguments(parser)

    def execute(self, args, opts) -> None:
        serve_forever(sandbox_from(opts), announce=lambda line: print(line, flush=True))
