"""Scrapyd: build the egg with scrapyd-deploy, upload it, schedule.json a crawl, see it land.

This is also the guard against the PyPI `typing` backport: Scrapyd's runner puts site-packages on
PYTHONPATH, where that backport would shadow the standard library and break the job."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.helpers import ROOT, add_store, products_of, runs_of

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _call(port: int, path: str, data: dict | None = None, files: dict | None = None) -> dict:
    headers = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}
    body = None
    if files:
        boundary = "cannaspiderboundary"
        parts = []
        for key, value in (data or {}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode())
        for key, blob in files.items():
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"; filename="x.egg"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n".encode()
                + blob
                + b"\r\n"
            )
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    elif data is not None:
        body = urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/{path}", data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_schedule_json_runs_a_crawl_from_the_deployed_egg(tmp_path, db, sandbox, sandbox_proxy):
    egg = tmp_path / "cannaspider.egg"
    build = subprocess.run(
        [str(BIN / "scrapyd-deploy"), "--build-egg", str(egg)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0 and egg.exists(), build.stderr
    store = sandbox.stores("AZ")[0]
    dispensary = add_store(db, store)

    port = _free_port()
    work = tmp_path / "scrapyd"
    work.mkdir()
    (work / "scrapyd.conf").write_text(
        (ROOT / "scrapyd.conf").read_text().replace("http_port    = 6800", f"http_port    = {port}")
    )
    env = {
        **os.environ,
        "DATABASE_URL": db,
        "DUTCHIE_GRAPHQL_URL": sandbox.urls.graphql,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "SCRAPYD_USERNAME": "ops",
        "SCRAPYD_PASSWORD": "s3cret",
    }
    server = subprocess.Popen(
        [str(BIN / "scrapyd")], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _call(port, "daemonstatus.json")
                break
            except OSError:
                assert time.monotonic() < deadline, "scrapyd did not start"
                time.sleep(0.2)
        added = _call(port, "addversion.json", {"project": "cannaspider", "version": "1"}, {"egg": egg.read_bytes()})
        assert added["status"] == "ok", added
        spiders = _call(port, "listspiders.json?project=cannaspider")["spiders"]
        assert {"store_discovery", "entry_point_discovery", "product_discovery", "product_resync"} <= set(spiders)
        job = _call(
            port,
            "schedule.json",
            {"project": "cannaspider", "spider": "product_resync", "dispensary_id": str(dispensary)},
        )
        assert job["status"] == "ok"
        deadline = time.monotonic() + 120
        while True:
            jobs = _call(port, "listjobs.json?project=cannaspider")
            if any(j["id"] == job["jobid"] for j in jobs["finished"]):
                break
            assert time.monotonic() < deadline, jobs
            time.sleep(0.5)
        log = next((work / ".data" / "scrapyd" / "logs").rglob(f"{job['jobid']}.log")).read_text()
        assert "Traceback" not in log, log[-3000:]
        assert "s3cret" not in log
    finally:
        server.terminate()
        server.wait(10)
    assert runs_of(db, dispensary)[0][0] == "complete"
    assert set(products_of(db, dispensary)) == set(sandbox.menu(store["id"], 0))
