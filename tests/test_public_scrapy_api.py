"""cannaspider/ uses Scrapy's public API only (issue #21, "Public Scrapy APIs only").

A private name (a leading underscore) is Scrapy's to change in any release, without a deprecation;
code built on one breaks silently on an upgrade. These tests read cannaspider/ with `ast` and fail
on: an import from a private Scrapy module or of a private name; a private attribute of Scrapy's
(one its own source defines) read on a Scrapy object, on `self` in a subclass of a Scrapy class, or
through getattr/hasattr; a private keyword argument passed to a Scrapy function (`_warn=`); one of
Scrapy's private meta keys (`_auth_proxy`); and attributes set on the Crawler, which is Scrapy's
object, not a place to keep ours (a WeakKeyDictionary keyed by the crawler is).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import scrapy

import cannaspider

PACKAGE = Path(cannaspider.__file__).parent
SCRAPY = Path(scrapy.__file__).parent
# the expressions that hold Scrapy's objects in this code base
SCRAPY_OBJECTS = re.compile(
    r"(^|\.)(crawler|crawler_process|settings|spider|engine|signals|stats|downloader|scraper|slot)$"
)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@functools.cache
def scrapy_private_names() -> frozenset[str]:
    """Every private attribute or method Scrapy's source defines (`def _x`, `self._x = …`)."""
    names: set[str] = set()
    for path in SCRAPY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
                names.add(node.attr)
    return frozenset(names)


@functools.cache
def scrapy_private_meta_keys() -> frozenset[str]:
    """The private keys Scrapy keeps in Request.meta (`meta["_auth_proxy"]`, `meta.pop("_depth")`…)."""
    pattern = re.compile(r"""meta(?:\.(?:get|pop|setdefault)\(|\[)\s*["'](_[a-z_]+)["']""")
    return frozenset(key for path in SCRAPY.rglob("*.py") for key in pattern.findall(path.read_text(encoding="utf-8")))


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(encoding="utf-8"))


def _scrapy_imports(tree: ast.Module) -> dict[str, object]:
    """Local name → the Scrapy module or object it was imported as."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "scrapy":
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                found[alias.asname or alias.name] = getattr(module, alias.name, None)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "scrapy":
                    found[alias.asname or alias.name.split(".")[0]] = importlib.import_module(alias.name.split(".")[0])
    return found


def _scrapy_subclasses(tree: ast.Module, imports: dict[str, object]) -> set[ast.ClassDef]:
    classes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                root = ast.unparse(base).split(".")[0]
                if root in imports:
                    classes.add(node)
    return classes


def _self_nodes(cls: ast.ClassDef) -> Iterator[ast.AST]:
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from ast.walk(item)


def violations(module: str, tree: ast.Module) -> list[str]:
    private = scrapy_private_names()
    imports = _scrapy_imports(tree)
    found: list[str] = []

    def at(node: ast.AST, why: str) -> None:
        found.append(f"{module}:{getattr(node, 'lineno', '?')}: {why}: {ast.unparse(node)[:100]}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "scrapy":
            if any(_private(part) for part in (node.module or "").split(".")):
                at(node, "a private Scrapy module")
            if any(_private(alias.name) for alias in node.names):
                at(node, "a private Scrapy name")
        elif isinstance(node, ast.Import):
            if any(alias.name.startswith("scrapy") and "._" in alias.name for alias in node.names):
                at(node, "a private Scrapy module")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = ast.unparse(node.value)
            if owner.split(".")[0] in imports and owner.split(".")[0] != "self":
                at(node, "a private attribute of a Scrapy module or class")
            elif node.attr in private and SCRAPY_OBJECTS.search(owner):
                at(node, "a private attribute of a Scrapy object")
        elif isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func in {"getattr", "hasattr", "setattr", "delattr"} and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value in private:
                    at(node, "a private attribute of Scrapy's, by name")
                if func == "setattr" and SCRAPY_OBJECTS.search(ast.unparse(node.args[0])):
                    at(node, "an attribute set on a Scrapy object")
            if func.split(".")[0] in imports and any(kw.arg and _private(kw.arg) for kw in node.keywords):
                at(node, "a private keyword argument of a Scrapy function")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and re.search(r"(^|\.)crawler$", ast.unparse(target.value)):
                    at(target, "an attribute set on the Crawler")
        elif isinstance(node, ast.Constant) and node.value in scrapy_private_meta_keys():
            at(node, "a private Scrapy meta key")

    for cls in _scrapy_subclasses(tree, imports):
        inherited = _inherited_private(cls, imports)
        for node in _self_nodes(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr in inherited
            ):
                at(node, f"a private attribute {cls.name} inherits from Scrapy")
    return found


def _inherited_private(cls: ast.ClassDef, imports: dict[str, object]) -> set[str]:
    """The private names Scrapy's base classes of `cls` define, in their source (instance
    attributes included, which dir() of the class does not list)."""
    names: set[str] = set()
    for base in cls.bases:
        obj: object = imports.get(ast.unparse(base).split(".")[0])
        for part in ast.unparse(base).split(".")[1:]:
            obj = getattr(obj, part, None)
        if not inspect.isclass(obj):
            continue
        for klass in obj.__mro__:
            if klass.__module__.startswith("scrapy"):
                names |= _private_of(klass)
    return names


@functools.cache
def _private_of(klass: type) -> frozenset[str]:
    names = {n for n in vars(klass) if _private(n)}
    try:
        source = ast.parse(inspect.getsource(klass).lstrip())
    except (OSError, TypeError, SyntaxError):
        return frozenset(names)
    names.update(
        n.attr
        for n in ast.walk(source)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _private(n.attr)
    )
    return frozenset(names)


def test_the_scan_finds_what_it_is_about():
    # the scanner on the forms this code base used: a test of nothing would pass on any tree
    tree = ast.parse(
        "from scrapy.core.downloader.handlers._aiohttp import X\n"
        "from scrapy.utils.defer import ensure_awaitable\n"
        "from scrapy.pipelines import ItemPipelineManager\n"
        "from scrapy.commands.crawl import Command\n"
        "class M(ItemPipelineManager):\n"
        "    def f(self):\n"
        "        getattr(self, '_mw_methods_requiring_spider', None)\n"
        "        ensure_awaitable(x, _warn='y')\n"
        "        self._own = 1\n"
        "class C(Command):\n"
        "    def run(self):\n"
        "        self._create_crawler('s')\n"
        "def g(crawler, request, spider):\n"
        "    crawler._cannaspider_proxy_pool = 1\n"
        "    request.meta.pop('_auth_proxy', None)\n"
        "    spider._own_helper()\n"
    )
    whys = [line.split(": ")[1] for line in violations("m.py", tree)]
    assert sorted(whys) == sorted(
        [
            "a private Scrapy module",
            "a private attribute of Scrapy's, by name",
            "a private keyword argument of a Scrapy function",
            "a private attribute C inherits from Scrapy",
            "an attribute set on the Crawler",
            "a private Scrapy meta key",
        ]
    )


def test_cannaspider_uses_only_public_scrapy_api():
    found = [line for module, tree in _modules() for line in violations(module, tree)]
    assert found == [], "private Scrapy surface in cannaspider/:\n" + "\n".join(found)


def test_the_names_issue_21_found_are_gone():
    # the plain-text check of the names the review listed, beside the structural one above
    names = ("_mw_methods_requiring_spider", "_warn=", "_create_crawler", "_auth_proxy", "_cannaspider_proxy_pool")
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in names
        if name in path.read_text(encoding="utf-8")
    ]
    assert found == []
