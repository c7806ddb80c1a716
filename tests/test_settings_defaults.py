"""Every default is stated once, in cannaspider/settings.py (issue #21, "Settings stated once").

A default restated at a read (`settings.getint("TASK_SLOTS", 16)`) is a second source of truth:
it is what a test on a bare crawler runs with, and it drifted from settings.py (TASK_SLOTS was
16 at two reads and 128 in settings.py). These tests read cannaspider/ with `ast` and fail on:
- a `settings.get*()` read with a default argument;
- a read whose value falls back to a literal or a module constant (`settings.get("X") or 8`);
- a read of a setting that neither settings.py nor Scrapy's own defaults define (a default
  that lives only at the read, as None).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import scrapy.settings.default_settings as scrapy_defaults

import cannaspider

PACKAGE = Path(cannaspider.__file__).parent
SETTINGS_MODULE = PACKAGE / "settings.py"
# Settings' typed getters; `get` and subscripts count only on something called *settings
TYPED_GETTERS = {"getint", "getfloat", "getbool", "getlist", "getdict", "getdictorlist", "getwithbase"}
GETTERS = TYPED_GETTERS | {"get"}


def _is_settings(node: ast.expr) -> bool:
    """`settings`, `self.settings`, `crawler.settings`, `get_project_settings()`…"""
    if isinstance(node, ast.Call):
        node = node.func
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.endswith("settings")


def _is_read(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    attr = node.func.attr
    return attr in TYPED_GETTERS or (attr == "get" and _is_settings(node.func.value))


def _reads(tree: ast.AST) -> Iterator[tuple[ast.AST, str | None]]:
    """(node, setting name or None when not a literal) of every settings read."""
    for node in ast.walk(tree):
        if _is_read(node):
            assert isinstance(node, ast.Call)
            first = node.args[0] if node.args else None
            yield node, first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_settings(node.value):
            key = node.slice
            yield node, key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


@functools.cache
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    return tuple(
        (str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != SETTINGS_MODULE
    )


def _where(module: str, node: ast.AST) -> str:
    return f"{module}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}"


def _restated_fallback(node: ast.BoolOp) -> bool:
    """`read or <literal>` / `read or MODULE_CONSTANT`: a default in disguise. `or None` (an empty
    value as None) and a computed fallback (`or data_dir / "cache"`) are not defaults."""
    if not (isinstance(node.op, ast.Or) and _is_read(node.values[0])):
        return False
    for fallback in node.values[1:]:
        if isinstance(fallback, ast.Constant) and fallback.value is not None:
            return True
        if isinstance(fallback, ast.Name) and fallback.id.isupper():
            return True
    return False


def defined_settings() -> set[str]:
    """The names settings.py assigns at its top level."""
    names: set[str] = set()
    for node in ast.parse(SETTINGS_MODULE.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        names.update(t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper())
    return names


def test_the_scan_sees_the_reads_it_is_about():
    # the scanner itself: a test of nothing would pass on a tree it cannot read
    tree = ast.parse(
        "a = settings.getint('TASK_SLOTS', 16)\n"
        "b = self.crawler.settings.getfloat('X')\n"
        "c = crawler.settings.get('Y', default=1)\n"
        "d = settings['Z']\n"
        "e = s.getbool('W', False)\n"
        "f = settings.get('V') or '.data'\n"
        "g = meta.get('k', 1)\n"
    )
    reads = {name: node for node, name in _reads(tree)}
    assert set(reads) == {"TASK_SLOTS", "X", "Y", "Z", "W", "V"}  # not meta.get
    with_default = {name for name, node in reads.items() if isinstance(node, ast.Call) and _has_default(node)}
    assert with_default == {"TASK_SLOTS", "Y", "W"}
    fallbacks = [n for n in ast.walk(tree) if isinstance(n, ast.BoolOp) and _restated_fallback(n)]
    assert [ast.unparse(n) for n in fallbacks] == ["settings.get('V') or '.data'"]


def _has_default(node: ast.Call) -> bool:
    return len(node.args) > 1 or any(k.arg == "default" for k in node.keywords)


def test_no_read_restates_a_default():
    restated = [
        _where(module, node)
        for module, tree in _modules()
        for node, _ in _reads(tree)
        if isinstance(node, ast.Call) and _has_default(node)
    ]
    assert restated == [], "defaults belong in cannaspider/settings.py only:\n" + "\n".join(restated)


def test_no_read_falls_back_to_a_constant():
    fallbacks = [
        _where(module, node)
        for module, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.BoolOp) and _restated_fallback(node)
    ]
    assert fallbacks == [], "defaults belong in cannaspider/settings.py only:\n" + "\n".join(fallbacks)


def test_every_setting_read_is_defined():
    known = defined_settings() | {name for name in vars(scrapy_defaults) if name.isupper()}
    undefined = sorted(
        _where(module, node) for module, tree in _modules() for node, name in _reads(tree) if name and name not in known
    )
    assert undefined == [], "define these in cannaspider/settings.py:\n" + "\n".join(undefined)


def test_settings_module_defines_the_project_settings():
    # the scan of settings.py against the module itself: a name it missed would pass the test above
    import cannaspider.settings as module

    assert defined_settings() >= {"TASK_SLOTS", "HEALTH_VALIDATION_SAMPLE_EVERY", "CONTRACT_STORES"}
    assert defined_settings() <= {name for name in vars(module) if name.isupper()}
