"""The development environment's `scrapy` commands: `sandbox`, `demo` and `check` (a sandbox for
the contracts). They are registered as `scrapy.commands` entry points by sandbox/pyproject.toml,
so they exist only where the sandbox is installed (./dev setup), never on a Scrapyd node.

Scrapy loads every entry point on each start, wherever it is started. Outside the checkout no
`cannaspider` is importable (the project is not installed: scrapy.cfg puts it on sys.path), so the
checkout holding this sandbox is appended to sys.path then: last, so that a `cannaspider` found
elsewhere first (an egg that Scrapyd activated) keeps precedence.
"""

import sys
from importlib.util import find_spec
from pathlib import Path

if find_spec("cannaspider") is None:
    sys.path.append(str(Path(__file__).resolve().parents[2]))
