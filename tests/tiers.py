"""The check on the suite's two tiers. Each test declares its tier (`pytestmark =
pytest.mark.integration`, or the marker on the test or its class; unmarked is `unit`); at
collection tests/conftest.py refuses to run a suite in which a test this module finds spawning is
not declared `integration`:

- `integration`: the test spawns something — a `scrapy` subprocess, a server (the sandbox, the
  HTTP API, a forward proxy, a webhook receiver, any socket server), a browser — directly, through
  a helper of its module or of tests/, or through a fixture that does;
- `unit`: everything else, in-process (it may use the test database): `./dev test -m unit`.

A name in SPAWNERS anywhere in a function's body makes it spawn; so does a function or class of
the same module, or one it imports from tests/ (`from tests.web.conftest import Service`), that
spawns, and a fixture that spawns, in the closure pytest resolves for the test. A new way of
starting something is added to SPAWNERS.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

TESTS = Path(__file__).parent
# names whose use starts a process, a server or a browser
SPAWNERS = frozenset(
    {
        "run_scrapy",
        "subprocess",
        "Popen",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "Sandbox",
        "ForwardProxy",
        "HTTPServer",
        "ThreadingHTTPServer",
        "TCPServer",
        "ThreadingTCPServer",
        "make_server",
        "uvicorn",
        "serve_app",
        "AppRunner",  # aiohttp's application server (tests/servers.py)
        "TCPSite",
        "start_server",  # asyncio's
        "serve_forever",
        "listen",  # a listening socket
        "async_playwright",
        "sync_playwright",
        "chromium",
    }
)


def _names(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.Attribute):
            found.add(child.attr)
    return found


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in node.decorator_list)


@functools.cache
def _definitions(path: Path) -> dict[str, tuple[set[str], bool]]:
    """Qualified name ("f", "Class.method", "Class") → (names it uses, is it a fixture)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, tuple[set[str], bool]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = (_names(node), _is_fixture(node))
        elif isinstance(node, ast.ClassDef):
            out[node.name] = (_names(node), False)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{item.name}"] = (_names(item), _is_fixture(item))
    return out


def _spawning(defs: dict[str, tuple[set[str], bool]], known: frozenset[str]) -> set[str]:
    """The definitions that spawn, directly or through one another (a fixed point)."""
    spawning: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (uses, _) in defs.items():
            if name not in spawning and uses & (known | {n.split(".")[-1] for n in spawning}):
                spawning.add(name)
                changed = True
    return spawning


def _imported(path: Path) -> dict[str, Path]:
    """Names this module imports from another module of tests/ (`from tests.web.conftest import
    Service`) → that module's file."""
    out: dict[str, Path] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests":
            parts = (node.module or "").split(".")[1:]
            source = TESTS.joinpath(*parts).with_suffix(".py")
            if not source.exists():
                source = TESTS.joinpath(*parts, "__init__.py")
            for alias in node.names:
                out[alias.asname or alias.name] = source
    return out


@functools.cache
def module_spawning(path: Path) -> frozenset[str]:
    """The definitions of this module that spawn (names it imports from tests/ included)."""
    known = set(SPAWNERS)
    for name, source in _imported(path).items():
        if source.exists() and source != path and name in module_spawning(source):
            known.add(name)
    own = _spawning(_definitions(path), frozenset(known))
    return frozenset(own | (known - SPAWNERS))


@functools.cache
def spawning_fixtures() -> frozenset[str]:
    """Fixture names (of any conftest.py or test module) whose definition spawns."""
    names: set[str] = set()
    for path in TESTS.rglob("*.py"):
        defs = _definitions(path)
        spawning = module_spawning(path)
        names |= {n.split(".")[-1] for n, (_, fixture) in defs.items() if fixture and n in spawning}
    return frozenset(names)


def is_integration(path: Path, qualname: str, fixturenames: list[str]) -> bool:
    spawning = module_spawning(path)
    if qualname in spawning or qualname.split(".")[0] in spawning:
        return True
    return bool(set(fixturenames) & spawning_fixtures())
