"""The development environment's `scrapy` commands: `sandbox`, `demo` and `check` (a sandbox for
the contracts). They are registered as `scrapy.commands` entry points by sandbox/pyproject.toml,
so they exist only where the sandbox is installed (./dev setup), never on a Scrapyd node."""
