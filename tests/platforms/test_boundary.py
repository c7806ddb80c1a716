"""The platform seam holds (docs/platforms.md): outside cannaspider/platforms/, code reaches a platform
only through the registry (`cannaspider.platforms`) and the interface (`cannaspider.platforms.interface`,
plus the shared `cannaspider.platforms.geography`), never a platform's own package
(`cannaspider.platforms.dutchie.…`). The scan reads every module of cannaspider/ and benchmarks/ with
`ast`, so an import added anywhere there fails here; the sandbox (an imitation of Dutchie's API) and the
tests (which test a platform's modules directly) are not part of the crawl and are not scanned.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import pytest

from cannaspider import platforms
from tests.helpers import ROOT

PLATFORMS_DIR = ROOT / "cannaspider" / "platforms"
SCANNED = (ROOT / "cannaspider", ROOT / "benchmarks")
# modules of the platforms package itself that anyone may import
SHARED = {"cannaspider.platforms", "cannaspider.platforms.interface", "cannaspider.platforms.geography"}
# benchmarks/market_off.py measures Dutchie's normalizer with its identity functions patched out: an
# experiment on that platform's module itself, not a crawl (benchmarks/README.md)
# benchmarks/proxy_bytes.py fetches Dutchie's pages itself, straight from the sandbox, for the
# product JSON's compressed minimum that the crawl's bytes are measured against
ALLOWED = {
    "benchmarks/market_off.py": {"cannaspider.platforms.dutchie"},
    "benchmarks/proxy_bytes.py": {"cannaspider.platforms.dutchie.operations"},
}


def package_of(path: Path) -> str:
    """The package a module is in (for an __init__.py, its own)."""
    return ".".join(path.relative_to(ROOT).parent.parts)


def is_module(name: str) -> bool:
    """Whether `name` is a module or package of the tree (not a name defined in one)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, module) of every module `tree` imports, relative imports resolved against `package`
    (the package the module is in); `from a import b` imports `a.b` too when b is a module."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names if is_module(f"{base}.{a.name}")]
    return found


def crossings(source: str, package: str, allowed: Collection[str] = ()) -> list[str]:
    """The imports of a platform's own modules in `source`, a module of `package` outside
    cannaspider/platforms/ (`allowed`: module prefixes it may import all the same)."""
    bad = []
    for line, name in imported(ast.parse(source), package):
        if not name.startswith("cannaspider.platforms.") or name in SHARED:
            continue
        if any(name == a or name.startswith(a + ".") for a in allowed):
            continue
        bad.append(f"{package}:{line} imports {name}")
    return bad


def outside_modules() -> list[Path]:
    paths = [p for top in SCANNED for p in sorted(top.rglob("*.py"))]
    return [p for p in paths if PLATFORMS_DIR not in p.parents]


def test_nothing_outside_platforms_imports_a_platforms_own_modules() -> None:
    modules = outside_modules()
    assert len(modules) > 150  # the walk found the real tree (cannaspider/ and benchmarks/)
    bad = []
    for path in modules:
        rel = str(path.relative_to(ROOT))
        source = path.read_text(encoding="utf-8")
        bad += [f"{rel}: {b}" for b in crossings(source, package_of(path), ALLOWED.get(rel, ()))]
    assert bad == []


@pytest.mark.parametrize(
    "source",
    [
        "from cannaspider.platforms.dutchie import graphql",
        "from cannaspider.platforms.dutchie.pagination import PageState",
        "import cannaspider.platforms.dutchie.normalizer",
        "from cannaspider.platforms import dutchie",
        "def f():\n    from cannaspider.platforms.dutchie.ids import product_id\n",
    ],
)
def test_the_scan_catches_an_import_of_a_platforms_module(source: str) -> None:
    assert crossings(source, "cannaspider.spiders") != []


def test_a_relative_import_is_resolved_before_it_is_judged() -> None:
    # in cannaspider/spiders/, `from ..platforms.dutchie import slugs` names the platform's package
    assert crossings("from ..platforms.dutchie import slugs", "cannaspider.spiders") != []


@pytest.mark.parametrize(
    "source",
    [
        "from cannaspider import platforms",
        "from cannaspider.platforms import build, get",
        "from cannaspider.platforms.interface import Platform, PlatformFailure",
        "from cannaspider.platforms.geography import search_points",
        "import cannaspider.platforms.interface",
    ],
)
def test_the_registry_and_the_interface_are_allowed(source: str) -> None:
    assert crossings(source, "cannaspider.spiders") == []


def test_every_registered_platform_is_a_package_under_platforms() -> None:
    for name in platforms.names():
        assert (PLATFORMS_DIR / name / "__init__.py").exists()
        assert platforms.get(name).__module__.startswith(f"cannaspider.platforms.{name}.")
