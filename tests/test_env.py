"""cannaspider/env.py: the one list of environment variables, the one precedence rule
(`-s` > environment > settings.py), and README's configuration table checked against both."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from scrapy.settings import Settings

from cannaspider import env
from cannaspider.db.connection import configured_url
from tests.helpers import ROOT

# defaults computed when settings.py loads (paths, the hash table): the table describes them in words
COMPUTED = {"CANNASPIDER_DATA_DIR", "DUTCHIE_PERSISTED_HASHES"}


def _settings_py_defaults() -> dict:
    """settings.py's values with no cannaspider variable in the environment (a fresh process)."""
    clean = {k: v for k, v in os.environ.items() if k not in {var.name for var in env.ENV_VARS}}
    code = (
        "import json, cannaspider.settings as s; "
        "print(json.dumps({k: v for k, v in vars(s).items() if k.isupper()}, default=str))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=clean, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _readme_table() -> list[tuple[str, str, str, str]]:
    section = (ROOT / "README.md").read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if (
            line.startswith("| ")
            and len(cells) == 4
            and not set(cells[0]) <= {"-", " "}
            and cells[0] != "environment variable"
        ):
            rows.append(tuple(cells))
    assert rows, "README has no configuration table"
    return rows  # type: ignore[return-value]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)


def _documented_default(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return f"`{value}`"


def test_readme_lists_exactly_the_variables_of_env_py_with_their_settings():
    declared = {var.name: var.setting for var in env.ENV_VARS}
    documented = {}
    for variable, setting, _, _ in _readme_table():
        if setting == "(Scrapyd)":  # Scrapyd's own variables, read by Scrapyd
            continue
        for name in _names(variable):
            documented[name] = (_names(setting) or [None])[0]
    assert documented == declared


@pytest.mark.integration
def test_readme_defaults_are_the_defaults_of_settings_py():
    defaults = _settings_py_defaults()
    checked = 0
    for _, setting, default, _ in _readme_table():
        for name in _names(setting):
            assert name in defaults, f"README documents {name}, which settings.py does not set"
            if name in COMPUTED:
                continue
            expected = _documented_default(defaults[name])
            assert default == expected or default.startswith(expected + " "), (name, default, expected)
            checked += 1
    assert checked >= 15


def test_the_command_line_wins_over_the_environment_which_wins_over_settings_py(monkeypatch):
    settings = Settings({"DATABASE_URL": None}, priority="default")  # settings.py's default
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert configured_url(settings) is None
    monkeypatch.setenv("DATABASE_URL", "postgresql://from-env/db")
    settings.setdict(env.overrides(), priority="project")  # what settings.py does once
    assert configured_url(settings) == "postgresql://from-env/db"
    settings.set("DATABASE_URL", "postgresql://from-cli/db", priority="cmdline")  # -s
    assert configured_url(settings) == "postgresql://from-cli/db"


def test_settings_built_without_the_project_fall_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("CANNASPIDER_MIGRATIONS_DIR", "/elsewhere")
    assert env.configured(Settings(), "CANNASPIDER_MIGRATIONS_DIR") == "/elsewhere"
    assert env.configured(None, "CANNASPIDER_MIGRATIONS_DIR") == "/elsewhere"
    monkeypatch.delenv("CANNASPIDER_MIGRATIONS_DIR")
    assert env.configured(None, "CANNASPIDER_MIGRATIONS_DIR") is None


def test_only_env_py_reads_cannaspider_variables_from_the_environment():
    offenders = []
    for path in sorted((ROOT / "cannaspider").rglob("*.py")):
        if path.name == "env.py" and path.parent.name == "cannaspider":
            continue
        source = path.read_text()
        for var in env.ENV_VARS:
            if re.search(rf"os\.environ(?:\.get)?\s*[\[(]\s*['\"]{var.name}['\"]", source):
                offenders.append(f"{path.relative_to(ROOT)}: {var.name}")
    assert offenders == [], "read these through cannaspider.env (env.configured)"
