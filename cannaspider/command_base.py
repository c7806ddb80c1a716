"""Base class of our `scrapy` commands (kept outside cannaspider.commands, where Scrapy
registers every ScrapyCommand subclass it finds as a command)."""

from __future__ import annotations

import argparse
import sys

from scrapy.commands import ScrapyCommand

from cannaspider.db.errors import DatabaseSetupError


class CannaspiderCommand(ScrapyCommand):
    """Base: turns DatabaseSetupError into one line on stderr and a non-zero exit code."""

    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            self.execute(args, opts)
        except DatabaseSetupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
