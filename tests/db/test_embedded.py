"""The embedded server: concurrent starts (threads and processes) share one server; it keeps
running; `scrapy db stop`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from cannaspider.db import embedded
from tests.helpers import ROOT, run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


@pytest.fixture
def server_dir():
    """A folder for a server of the test's own, under .data rather than pytest's tmp_path: a pytest
    session starting on this machine resets /tmp/pytest-of-<user> to mode 0700, which locks the
    server's system user (embedded_postgres, under root) out of a running server's folder."""
    (ROOT / ".data").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="embedded-test-", dir=ROOT / ".data"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


START = """
import json, sys
from pathlib import Path
from cannaspider.db import embedded
url = embedded.ensure_running(Path(sys.argv[1]))
print(json.dumps({"url": url, "pid": embedded.running_pid(Path(sys.argv[1]))}))
"""


def start_at_once(processes: int, script: str, *argv: str) -> list[dict]:
    """Run `script` in that many processes at the same time; the JSON each printed last."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(processes)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    return [json.loads(o[0].strip().splitlines()[-1]) for o in outs]


def test_two_processes_starting_at_once_share_one_server(server_dir):
    pgdata = server_dir / "pg"
    try:
        results = start_at_once(2, START, str(pgdata))
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
        stopped = embedded.stop(pgdata)  # asserted below: a failed start's own error comes first
    assert stopped and embedded.running_pid(pgdata) is None


# several threads of one process start it at the same instant (as the spiders of one `scrapy check`
# do): each prints the URL it got or the error it raised
START_THREADS = """
import json, sys, threading
from pathlib import Path
from cannaspider.db import embedded
pgdata, n = Path(sys.argv[1]), int(sys.argv[2])
barrier, results = threading.Barrier(n), []
def start():
    barrier.wait()
    try:
        results.append(embedded.ensure_running(pgdata))
    except Exception as exc:
        results.append(f"error: {exc!r}")
threads = [threading.Thread(target=start) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"results": results, "pid": embedded.running_pid(pgdata)}))
"""


def test_threads_of_several_processes_starting_at_once_share_one_server(server_dir):
    pgdata = server_dir / "pg"  # a fresh folder: the first start also runs initdb
    try:
        reports = start_at_once(3, START_THREADS, str(pgdata), "4")
        urls = [url for report in reports for url in report["results"]]
        assert len(urls) == 12
        assert not [u for u in urls if u.startswith("error")], urls
        assert len(set(urls)) == 1
        assert len({r["pid"] for r in reports}) == 1 and reports[0]["pid"] is not None
        with psycopg.connect(urls[0]) as conn:
            assert conn.execute("SELECT current_database()").fetchone()[0] == "cannaspider"
    finally:
        embedded.stop(pgdata)


def test_db_commands_start_status_and_stop_the_embedded_server(server_dir):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["CANNASPIDER_DATA_DIR"] = str(server_dir / "data")
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
