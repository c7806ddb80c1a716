"""The embedded server: concurrent starts share one server; it keeps running; `scrapy db stop`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg

from cannaspider.db import embedded
from tests.helpers import ROOT, run_scrapy

START = """
import json, sys
from pathlib import Path
from cannaspider.db import embedded
url = embedded.ensure_running(Path(sys.argv[1]))
print(json.dumps({"url": url, "pid": embedded.running_pid(Path(sys.argv[1]))}))
"""


def test_two_processes_starting_at_once_share_one_server(tmp_path):
    pgdata = tmp_path / "pg"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", START, str(pgdata)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    try:
        assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
        results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
        assert results[0]["pid"] == results[1]["pid"] is not None
        postmasters = [
            line
            for line in subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
            if str(pgdata) in line and "postgres" in line and " -D " in line
        ]
        assert len(postmasters) == 1, postmasters
        # both processes exited; the server kept running for later commands
        with psycopg.connect(results[0]["url"]) as conn:
            assert conn.execute("SELECT current_database()").fetchone()[0] == "cannaspider"
    finally:
        assert embedded.stop(pgdata)
    assert embedded.running_pid(pgdata) is None


def test_db_commands_start_status_and_stop_the_embedded_server(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["CANNASPIDER_DATA_DIR"] = str(tmp_path / "data")
    started = run_scrapy("db", "start", env=env)
    assert started.returncode == 0, started.stderr
    assert "running" in started.stdout
    status = run_scrapy("db", "status", env=env)
    assert "running (pid" in status.stdout
    stopped = run_scrapy("db", "stop", env=env)
    assert stopped.stdout.strip() == "stopped", stopped.stderr[-2000:]
    assert "stopped" in run_scrapy("db", "status", env=env).stdout


def test_unwritable_data_folder_is_one_clear_line(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["CANNASPIDER_DATA_DIR"] = str(locked / "data")
    try:
        if os.geteuid() == 0:
            # root writes anywhere: use a path under a regular file instead, which nobody can create
            (tmp_path / "file").write_text("")
            env["CANNASPIDER_DATA_DIR"] = str(tmp_path / "file" / "data")
        result = run_scrapy("migrate", env=env)
    finally:
        locked.chmod(0o700)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:") and "CANNASPIDER_DATA_DIR" in lines[0]
