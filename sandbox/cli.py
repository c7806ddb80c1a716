"""Command-line options shared by `scrapy sandbox` and `python -m sandbox`."""

from __future__ import annotations

import argparse
import sys

from sandbox.catalog import CatalogConfig
from sandbox.server import Sandbox, serve_forever


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8765, help="Dutchie-like site port (0: any free)")
    parser.add_argument("--firecrawl-port", type=int, default=3002, help="Firecrawl-like API port")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--states", default="AZ,MI,NV")
    parser.add_argument("--stores-per-state", type=int, default=6)
    parser.add_argument("--min-products", type=int, default=120)
    parser.add_argument("--max-products", type=int, default=260)
    parser.add_argument("--jane-stores-per-state", type=int, default=4, help="Jane's stores (in the same cities)")
    parser.add_argument("--proxy", action="store_true", help="also start the forward proxy")
    parser.add_argument("--proxy-auth", default=None, help="user:password for the forward proxy")


def sandbox_from(args: argparse.Namespace) -> Sandbox:
    config = CatalogConfig(
        seed=args.seed,
        states=tuple(s.strip().upper() for s in args.states.split(",")),
        stores_per_state=args.stores_per_state,
        min_products=args.min_products,
        max_products=args.max_products,
        jane_stores_per_state=args.jane_stores_per_state,
    )
    auth = tuple(args.proxy_auth.split(":", 1)) if args.proxy_auth else None
    return Sandbox(
        config, port=args.port, firecrawl_port=args.firecrawl_port, proxy=args.proxy or bool(auth), proxy_auth=auth
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox")
    add_arguments(parser)
    args = parser.parse_args(argv)
    serve_forever(sandbox_from(args), announce=lambda line: print(line, flush=True, file=sys.stdout))
