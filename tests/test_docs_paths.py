"""Docs cite files that exist: every path that README.md or a page of docs/ names
(`cannaspider/tasks/queue/outcomes.py`, `migrations/011_lean_snapshots.sql`, `pipelines/images.py`, a folder
ending in `/`) must be in the tree, so a module moved or split fails here instead of leaving the
docs stale without anyone noticing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
TOP = ("cannaspider", "sandbox", "migrations", "tests", "benchmarks", "docs")
# the package's own folders: docs often cite `pipelines/images.py` for `cannaspider/pipelines/images.py`
SUBPACKAGES = tuple(sorted(p.name for p in (ROOT / "cannaspider").iterdir() if (p / "__init__.py").exists()))

# A path: a top-level folder or a subpackage, then segments, ending in an extension or a `/`. Stats
# (`cannaspider/images_failed/<reason>`) have no extension and are not paths; nor are placeholders
# (`<…>`, `NNN`, `*`) or a dotted import path (`benchmarks.pillow_convert.to_webp`).
PATH = re.compile(rf"(?<![\w./<-])((?:{'|'.join(TOP + SUBPACKAGES)})/[\w./-]*(?:\.[a-z]+|/))(?![\w<*…{{])")


def cited_paths(text: str) -> list[str]:
    return [m.group(1) for m in PATH.finditer(text) if "NNN" not in m.group(1)]


def exists(path: str) -> bool:
    return (ROOT / path).exists() or (path.split("/", 1)[0] in SUBPACKAGES and (ROOT / "cannaspider" / path).exists())


def test_cited_paths_are_found_in_text() -> None:
    text = (
        "See `cannaspider/tasks/queue/outcomes.py`, pipelines/images.py, migrations/011_lean_snapshots.sql and\n"
        "`cannaspider/monitors/`; not the stat cannaspider/images_failed/<reason>, not\n"
        "storage/images/products/<state>/ nor migrations/NNN_name.sql nor cannaspider/gone.py."
    )
    assert cited_paths(text) == [
        "cannaspider/tasks/queue/outcomes.py",
        "pipelines/images.py",
        "migrations/011_lean_snapshots.sql",
        "cannaspider/monitors/",
        "cannaspider/gone.py",
    ]
    assert [p for p in cited_paths(text) if not exists(p)] == ["cannaspider/gone.py"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_path_exists(doc: Path) -> None:
    missing = [
        f"{doc.relative_to(ROOT)}:{n}: {path}"
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        for path in cited_paths(line)
        if not exists(path)
    ]
    assert not missing, "paths cited in the docs that do not exist:\n" + "\n".join(missing)
