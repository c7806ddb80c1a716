"""`scrapy crawl` as operators and Scrapyd run it: its exit code, its last stderr line, and what a
stopped or killed crawl leaves in crawl_runs (real subprocesses, real signals)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from cannaspider.commands.crawl import EXIT_FEED, EXIT_INCOMPLETE
from tests.helpers import (
    NO_IMAGES,
    ROOT,
    SANDBOX_PROXY_AUTH,
    add_store,
    products_of,
    register_proxy,
    run_scrapy,
    runs_of,
)

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def _popen_crawl(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_running_run(db: str, d: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any(run[0] == "running" for run in runs_of(db, d)):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the crawl did not open its run: {proc.communicate()[1][-3000:]}")
        time.sleep(0.05)


def _slow_store(sandbox, db: str) -> int:
    """A store whose second page takes 3 s: its crawl stays open while the test acts on it (a
    graceful stop waits for that page in flight: the longer it is, the longer the stop)."""
    store = max(sandbox.stores("AZ"), key=lambda s: s["product_count"])
    sandbox.faults({"kind": "slow", "store": store["id"], "pages": [1], "delay": 3.0})
    return add_store(db, store)


def _wait_for_page(sandbox, page: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the crawl asks for `page` (pages come in order: the page before it has arrived)."""
    deadline = time.monotonic() + timeout
    while not sandbox.pages_asked(page):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"page {page} was never asked for: {proc.communicate()[1][-3000:]}")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_crawl_closes_its_runs_as_incomplete_with_the_reason(db, sandbox, scrapy_env, signum):
    d = _slow_store(sandbox, db)
    proc = _popen_crawl(scrapy_env, "product_resync", "-a", f"dispensary_id={d}")
    _wait_for_running_run(db, d, proc)
    _wait_for_page(sandbox, 1, proc)  # page 0 has arrived, its rows in the writers' hands; page 1 is on its way
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    [(status, error, *_)] = runs_of(db, d)
    assert status == "incomplete", stderr[-3000:]
    assert "stopped (shutdown)" in error
    # nothing is marked missing by a stopped crawl
    assert all(misses == 0 and stock == "in_stock" for misses, stock, _ in products_of(db, d).values())
    assert "Traceback" not in stderr


def test_a_killed_crawls_run_is_failed_by_the_next_crawl(db, sandbox, scrapy_env):
    d = _slow_store(sandbox, db)
    proc = _popen_crawl(scrapy_env, "product_resync", "-a", f"dispensary_id={d}")
    _wait_for_running_run(db, d, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert [run[0] for run in runs_of(db, d)] == ["running"]  # nobody could close it
    sandbox.reset()
    # the next crawl (another store's or this one's) finds the dead process's run at once
    result = run_scrapy("crawl", "product_resync", "-a", f"dispensary_id={d}", *NO_IMAGES, env=scrapy_env)
    assert result.returncode == 0, result.stderr[-3000:]
    (killed_status, killed_error, *_), (next_status, *_) = runs_of(db, d)
    assert killed_status == "failed" and f"pid {proc.pid}" in killed_error
    assert next_status == "complete"


def _last_line(result: subprocess.CompletedProcess) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_a_wrong_database_url_is_one_line_and_a_non_zero_exit(scrapy_env):
    env = {**scrapy_env, "DATABASE_URL": "postgresql://app:s3cret-pw@127.0.0.1:1/nowhere"}
    result = run_scrapy("crawl", "product_resync", "-a", "state=AZ", env=env)
    assert result.returncode == 2
    assert _last_line(result).startswith("error: cannot connect to PostgreSQL at postgresql://app:***@127.0.0.1:1")
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_a_data_folder_that_is_a_file_is_one_line_and_a_non_zero_exit(scrapy_env, tmp_path):
    (tmp_path / "afile").write_text("")
    env = {k: v for k, v in scrapy_env.items() if k != "DATABASE_URL"}
    env["CANNASPIDER_DATA_DIR"] = str(tmp_path / "afile")
    result = run_scrapy("crawl", "product_resync", "-a", "state=AZ", env=env)
    assert result.returncode == 2
    assert _last_line(result).startswith("error: the data folder")
    assert "is a file" in _last_line(result)
    assert "Traceback" not in result.stderr


def test_an_unmigrated_database_says_run_scrapy_migrate(scrapy_env, empty_database):
    result = run_scrapy("crawl", "product_resync", "-a", "state=AZ", env={**scrapy_env, "DATABASE_URL": empty_database})
    assert result.returncode == 2
    assert "run `scrapy migrate`" in _last_line(result)
    assert "Traceback" not in result.stderr


def test_a_database_missing_the_latest_migration_says_run_scrapy_migrate(scrapy_env, empty_database, tmp_path):
    from cannaspider.db import migrations

    older = tmp_path / "migrations"
    older.mkdir()
    for path in sorted((ROOT / "migrations").glob("*.sql"))[:-1]:
        (older / path.name).write_text(path.read_text())
    migrations.apply(empty_database, older, log=lambda _: None)
    result = run_scrapy("crawl", "product_resync", "-a", "state=AZ", env={**scrapy_env, "DATABASE_URL": empty_database})
    assert result.returncode == 2
    newest = sorted((ROOT / "migrations").glob("*.sql"))[-1].name
    assert _last_line(result) == f"error: the database lacks migration(s) {newest}: run `scrapy migrate`"


def test_setting_on_the_command_line_wins_over_the_environment(scrapy_env):
    # the environment names a good database, -s a bad one: -s must be the one tried
    result = run_scrapy(
        "crawl",
        "product_resync",
        "-a",
        "state=AZ",
        "-s",
        "DATABASE_URL=postgresql://cli:pw@127.0.0.1:1/from_cli",
        env=scrapy_env,
    )
    assert result.returncode == 2
    assert "from_cli" in _last_line(result)


def test_a_database_lost_mid_crawl_is_one_line_and_a_non_zero_exit(sandbox, scrapy_env, empty_database, admin_url):
    from cannaspider.db import migrations

    migrations.apply(empty_database, log=lambda _: None)
    register_proxy(empty_database, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
    d = _slow_store(sandbox, empty_database)
    proc = _popen_crawl(
        {**scrapy_env, "DATABASE_URL": empty_database},
        "product_resync",
        "-a",
        f"dispensary_id={d}",
        "-s",
        "CRAWL_COMPLETION_WAIT_S=5",
        "-s",
        "DB_POOL_TIMEOUT_S=2",
    )
    _wait_for_running_run(empty_database, d, proc)
    name = psycopg.conninfo.conninfo_to_dict(empty_database)["dbname"]
    with psycopg.connect(admin_url, autocommit=True) as conn:  # gone for good, its connections cut
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 2, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: the database was lost during the crawl"), stderr[-3000:]
    assert "1 crawl run(s) stay 'running'" in last
    assert "Traceback" not in stderr, stderr[-3000:]


def test_a_feed_on_a_full_disk_is_one_error_line_and_exit_4_and_every_row_is_stored(db, sandbox, scrapy_env):
    # /dev/full: every write fails with ENOSPC, as on a full disk (without mounting one)
    store = max(sandbox.stores("AZ"), key=lambda s: s["product_count"])
    d = add_store(db, store)
    argv = ("crawl", "product_resync", "-a", f"dispensary_id={d}", "-O", "/dev/full:jsonlines", *NO_IMAGES)
    result = run_scrapy(*argv, env=scrapy_env)
    assert result.returncode == EXIT_FEED, result.stderr[-3000:]
    assert _last_line(result) == "error: the feed /dev/full could not be written: No space left on device"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if " ERROR: " in line]
    # the feed's failure when it happened, Scrapy's "Error storing" at the close (and the health
    # alert those lines raise), not one per item
    assert len(errors) <= 3, result.stderr[-5000:]
    assert "the crawl goes on without it" in errors[0]
    assert any(
        f"Error storing jsonlines feed ({len(sandbox.menu(store['id'], 0))} items) in: /dev/full" in line
        for line in errors
    )
    # the database writes never depended on the feed
    assert [run[0] for run in runs_of(db, d)] == ["complete"]
    assert len(products_of(db, d)) == len(sandbox.menu(store["id"], 0))


def test_a_feed_not_written_beside_an_incomplete_store_crawl_exits_3_and_says_both(db, sandbox, scrapy_env):
    store = max(sandbox.stores("AZ"), key=lambda s: s["product_count"])
    d = add_store(db, store)
    sandbox.faults({"kind": "lying_total", "factor": 2, "store": store["id"]})  # fewer than totalCount: incomplete
    argv = ("crawl", "product_resync", "-a", f"dispensary_id={d}", "-O", "/dev/full:jsonlines", *NO_IMAGES)
    result = run_scrapy(*argv, env=scrapy_env)
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    assert _last_line(result) == (
        "error: 1 unit(s) of work incomplete (the crawl ended: finished); "
        "the feed /dev/full could not be written: No space left on device"
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize(
    ("args", "env_change", "says"),
    [
        # a spider argument refused before the crawl starts
        (("-a", "follow=maybe"), {}, "error: product_resync: follow must be 1 or 0"),
        # the database, found unreachable once the crawl runs (its fatal-error stat)
        (
            ("-a", "state=AZ"),
            {"DATABASE_URL": "postgresql://app:s3cret-pw@127.0.0.1:1/nowhere"},
            "error: cannot connect to PostgreSQL at postgresql://app:***@127.0.0.1:1",
        ),
    ],
)
def test_the_error_line_is_in_the_jobs_own_log_file(scrapy_env, tmp_path, args, env_change, says):
    """Scrapyd sets LOG_FILE per job and keeps stderr in its daemon log only: the job's log says why it failed."""
    log = tmp_path / "job.log"
    result = run_scrapy("crawl", "product_resync", *args, "-s", f"LOG_FILE={log}", env={**scrapy_env, **env_change})
    assert result.returncode == 2
    assert _last_line(result).startswith(says)
    last = log.read_text().strip().splitlines()[-1]
    assert f"[cannaspider.commands.crawl] ERROR: {_last_line(result)} (exit code 2)" in last, last
    assert "s3cret-pw" not in log.read_text()


def test_a_crawl_without_a_log_file_prints_its_error_line_once(scrapy_env):
    result = run_scrapy("crawl", "product_resync", "-a", "follow=maybe", env=scrapy_env)
    assert result.returncode == 2
    assert result.stderr.count("follow must be 1 or 0") == 1, result.stderr[-2000:]


def test_each_crawl_is_a_row_of_crawl_jobs_with_its_exit_code_and_reason(db, sql, sandbox, scrapy_env):
    """Scrapyd's job id is the `_job` argument it passes; the error: line stays stderr's last."""
    failed = run_scrapy("crawl", "product_resync", "-a", "follow=maybe", "-a", "_job=j-bad", env=scrapy_env)
    assert failed.returncode == 2 and _last_line(failed).startswith("error: product_resync: follow must be 1 or 0")
    d = add_store(db, sandbox.stores("AZ")[0])
    done = run_scrapy("crawl", "product_resync", "-a", f"dispensary_id={d}", *NO_IMAGES, env=scrapy_env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = sql(
        "SELECT job, spider, arguments, exit_code, error, finish_reason, started_at IS NOT NULL, host, pid"
        " FROM crawl_jobs ORDER BY id"
    )
    (job, spider, arguments, code, error, _, _, host, pid), ok = rows
    assert (job, spider, arguments, code) == ("j-bad", "product_resync", {"follow": "maybe"}, 2)
    assert error == _last_line(failed).removeprefix("error: ") and host and pid > 0
    assert ok[:7] == (None, "product_resync", {"dispensary_id": str(d)}, 0, None, "finished", True)


def test_a_long_crawl_says_how_many_of_its_stores_are_done(db, sandbox, scrapy_env):
    """UNITS_PROGRESS_INTERVAL_S: the stores closed out of the crawl's targets, while it runs."""
    stores = sorted(sandbox.stores("AZ"), key=lambda s: s["product_count"])[:3]
    sandbox.faults({"kind": "slow", "store": stores[-1]["id"], "pages": [0], "delay": 3.0})
    ids = [add_store(db, store) for store in stores]
    argv = ("crawl", "product_resync", "-a", "dispensary_id=" + ",".join(map(str, ids)), *NO_IMAGES)
    result = run_scrapy(*argv, "-s", "UNITS_PROGRESS_INTERVAL_S=0.3", env=scrapy_env, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    said = [
        (int(done), int(total))
        for done, total in re.findall(
            r"INFO: product_resync: (\d+) of (\d+) target\(s\) done \(0 failed\)", result.stderr
        )
    ]
    assert said and said == sorted(set(said)), result.stderr[-3000:]  # only when something moved
    assert all(total == 3 for _, total in said) and said[0][0] < 3  # said while the slow one was out
