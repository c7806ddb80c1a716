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
import operator
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


# --- defaults restated as parameter defaults ---------------------------------------------------
# A function that production always calls with a setting's value (open_backend's timeout, claim's
# lease_s) restated the value as its parameter's default: a caller that forgets the argument
# runs silently with a copy, and the copy drifts. Such a parameter is required instead.
KNOWN_RESTATED: set[str] = set()  # none left
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Pow: operator.pow}


def _constant(node: ast.expr | None) -> object:
    """The value of a literal expression (`600.0`, `50_000_000`, `6 * 3600.0`, `"1GB"`), else None."""
    if isinstance(node, ast.Constant):
        return None if isinstance(node.value, bool) else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant(node.operand)
        return -value if isinstance(value, int | float) else None
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _constant(node.left), _constant(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return OPERATORS[type(node.op)](left, right)
    return None


def _module_constants(tree: ast.Module) -> dict[str, object]:
    """NAME -> value of a module's top-level literal assignments (settings.py's values, without
    the environment's overrides, or a module's DEFAULT_TIMEOUT_S = 10.0)."""
    values: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if isinstance(target, ast.Name) and target.id.isupper():
            value = _constant(node.value)  # type: ignore[union-attr]
            if value is not None:
                values[target.id] = value
    return values


def _defaults(tree: ast.Module) -> Iterator[tuple[str, str, ast.expr]]:
    """(owner, name, default) of every parameter default and class-level field default."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            positional = a.posonlyargs + a.args
            for arg, default in zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True):
                yield node.name, arg.arg, default
            for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                if kw_default is not None:
                    yield node.name, arg.arg, kw_default
        elif isinstance(node, ast.ClassDef):
            for field in node.body:
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and field.value is not None:
                    yield node.name, field.target.id, field.value


def _restated_defaults(module: str, tree: ast.Module, settings: dict[str, object]) -> Iterator[str]:
    """A default equal to the value of a setting its name is the tail of (lease_s = 600.0:
    TASK_LEASE_S; max_pixels = DEFAULT_MAX_PIXELS, 50_000_000: IMAGES_MAX_PIXELS)."""
    constants = _module_constants(tree)
    for owner, name, default in _defaults(tree):
        value = constants.get(default.id) if isinstance(default, ast.Name) else _constant(default)
        if value is None or value == 0:  # a 0 is a count's start (StoreCrawl.errors), not HEALTH_MAX_ERRORS
            continue
        tail = name.upper()
        for setting, setting_value in settings.items():
            if (setting == tail or setting.endswith("_" + tail)) and setting_value == value:
                yield f"{module}: {owner}({name}={ast.unparse(default)}) restates {setting}"


def _project_defaults() -> dict[str, object]:
    return _module_constants(ast.parse(SETTINGS_MODULE.read_text(encoding="utf-8")))


def test_the_scan_sees_restated_parameter_defaults():
    tree = ast.parse(
        "DEFAULT_MAX_PIXELS = 50_000_000\n"
        "def claim(conn, limit=1, lease_s=600.0): ...\n"
        "def to_webp(body, *, quality=90, max_pixels=DEFAULT_MAX_PIXELS, min_words=2): ...\n"
        "class Limits:\n"
        "    max_items: int = 500\n"
        "    retry_s: float = 6 * 3600.0\n"
        "def version(executable, timeout=20.0): ...\n"
        "class Crawl:\n"
        "    errors: int = 0\n"
    )
    settings = _project_defaults()
    assert settings["TASK_LEASE_S"] == 600.0 and settings["PROXY_PROBE_TIMEOUT_S"] == 20.0
    settings["X_RETRY_S"] = 6 * 3600.0
    found = list(_restated_defaults("m.py", tree, settings))
    assert found == [
        "m.py: claim(lease_s=600.0) restates TASK_LEASE_S",
        "m.py: to_webp(quality=90) restates IMAGES_WEBP_QUALITY",
        "m.py: to_webp(max_pixels=DEFAULT_MAX_PIXELS) restates IMAGES_MAX_PIXELS",
        "m.py: Limits(max_items=500) restates ONPAGE_CORPUS_MAX_ITEMS",
        "m.py: Limits(retry_s=6 * 3600.0) restates X_RETRY_S",
    ]  # not limit=1, min_words=2 (ONPAGE_MIN_WORDS is 1), a timeout no setting's name ends with, a count's 0


def test_no_parameter_default_restates_a_setting():
    settings = _project_defaults()
    restated = {line for module, tree in _modules() for line in _restated_defaults(module, tree, settings)}
    unexpected = sorted(restated - KNOWN_RESTATED)
    assert unexpected == [], (
        "make these parameters required and pass the setting's value (defaults belong in "
        "cannaspider/settings.py only):\n" + "\n".join(unexpected)
    )
