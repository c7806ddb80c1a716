"""The queue sits beneath the crawl (docs/architecture.md, "Task queue"): the role table is
data in cannaspider/tasks/roles.py, so the queue (cannaspider/tasks/), its commands (`scrapy
enqueue`, `scrapy tasks`, `scrapy schedule`) and the HTTP service (cannaspider/web/) never import a
spider nor load one, and no import runs from tasks/ up to the units of work or the stealth layer.

The imports are drawn with `ast` from the source (tests/platforms/test_boundary.py's reading,
relative imports resolved, `from a import b` as a.b when b is a module), so an import added
anywhere, even inside a function, fails here (the database layer beneath the queue imports nothing
of it either); one test also imports the queue's side in a fresh interpreter and looks at what it
loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.platforms.test_boundary import imported, package_of

PACKAGE = ROOT / "cannaspider"
# the queue's side: the queue, its commands and the HTTP service
QUEUE_SIDE = [
    *sorted((PACKAGE / "tasks").rglob("*.py")),
    *(PACKAGE / "commands" / f"{name}.py" for name in ("enqueue", "tasks", "schedule")),
    *sorted((PACKAGE / "web").rglob("*.py")),
]
# what the queue's side never imports: the spiders, and the role types' old home
SPIDERS = ("cannaspider.spiders", "cannaspider.units.role", "scrapy.spiderloader")
# the packages above the queue: nothing in tasks/ imports them
ABOVE_TASKS = ("cannaspider.units", "cannaspider.stealth", "cannaspider.spiders", "cannaspider.pipelines")


def module_imports(path: Path) -> list[tuple[int, str]]:
    return imported(ast.parse(path.read_text(encoding="utf-8")), package_of(path))


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def crossings(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in paths
        for line, name in module_imports(path)
        if under(name, forbidden)
    ]


def package_graph() -> dict[str, set[str]]:
    """cannaspider's subpackages (tasks, units, stealth, …) and those each imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) < 2:
            continue  # a top-level module, not a package
        edges = graph.setdefault(parts[0], set())
        for _, name in module_imports(path):
            pieces = name.split(".")
            if len(pieces) > 1 and pieces[0] == "cannaspider" and pieces[1] != parts[0]:
                if (PACKAGE / pieces[1]).is_dir():
                    edges.add(pieces[1])
    return graph


def test_the_scan_reads_the_queue_side():
    names = {str(p.relative_to(PACKAGE)) for p in QUEUE_SIDE}
    assert {"tasks/roles.py", "tasks/schedule.py", "tasks/queue/enqueuing.py", "web/app.py"} <= names
    assert {"commands/enqueue.py", "commands/tasks.py", "commands/schedule.py"} <= names


def test_the_queue_its_commands_and_the_web_service_never_import_a_spider():
    assert crossings(QUEUE_SIDE, SPIDERS) == []


def test_no_import_runs_from_tasks_up_to_the_units_the_stealth_layer_or_the_spiders():
    assert crossings(sorted((PACKAGE / "tasks").rglob("*.py")), ABOVE_TASKS) == []


def test_tasks_and_no_other_package_import_each_other():
    # units <-> tasks (the role types), stealth <-> tasks (the schedule's re-probe) and db <-> tasks
    # (the runs' lease type) were such pairs; the database layer reads a lease as a Protocol
    graph = package_graph()
    assert {"units", "stealth", "spiders", "pipelines", "db", "web", "commands"} <= set(graph)  # the scan found them
    assert sorted(other for other in graph["tasks"] if "tasks" in graph.get(other, ())) == []
    assert "tasks" not in graph["db"]


def test_the_scan_catches_an_arrow_up():
    # the same reading as the tests above, on a module that imports what the queue must not
    source = "def f():\n    from cannaspider.spiders.products import ProductSpider\n"
    found = imported(ast.parse(source), "cannaspider.tasks")
    assert [name for _, name in found if under(name, SPIDERS)] != []
    found = imported(ast.parse("from ..units import lifecycle"), "cannaspider.tasks")
    assert [name for _, name in found if under(name, ABOVE_TASKS)] == [
        "cannaspider.units",
        "cannaspider.units.lifecycle",
    ]


@pytest.mark.integration
def test_importing_the_queue_side_loads_no_spider():
    # a fresh interpreter: the queue, its commands and the web service imported, the role table and
    # the OpenAPI schema read; no module of the spiders (nor of the units above the queue) is loaded
    code = """
import sys
import cannaspider.commands.enqueue, cannaspider.commands.schedule, cannaspider.commands.tasks
import cannaspider.tasks.drain, cannaspider.tasks.schedule, cannaspider.tasks.scrapyd
import cannaspider.web.app as app
from cannaspider.tasks import roles
assert len(roles.all_roles()) == 6
app.create_app("postgresql://unused/db", None, pool_max_size=1).openapi()
print(sorted(m for m in sys.modules if m.startswith(("cannaspider.spiders", "cannaspider.units"))))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
