"""A plain thumbnail's wait while one client asks /img for heavy renders (#28, 13): the server
(uvicorn and the /img router, the project's /img settings) on 127.0.0.1, `--heavy` requests of
`w=4000&h=4000&fit=contain&blur=20` (distinct `q`, so none is shared) of a 4000² stored webp sent
at once, then a cold `w=200` of another image from another client (127.0.0.2): its latency, and
the heavy requests' statuses.

    python benchmarks/img_contention.py            # 6 heavy requests
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from scrapy.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.img_worst import source  # noqa: E402
from cannaspider.images.paths import product_image_path  # noqa: E402
from cannaspider.web.images import ImageProxy, image_router  # noqa: E402
from tests.httpclient import http  # noqa: E402

HEAVY = "w=4000&h=4000&fit=contain&blur=20"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heavy", type=int, default=6)
    args = parser.parse_args()
    settings = Settings()
    settings.setmodule("cannaspider.settings")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp, "store")
        big, small = (product_image_path("AZ", "s", "b", f"{n:024x}", f"https://x/{n}.jpg") for n in (1, 2))
        for rel, side in ((big, 4000), (small, 1000)):
            (store / rel).parent.mkdir(parents=True, exist_ok=True)
            source(Path(tmp), side).rename(store / rel)
        settings.set("IMAGES_STORE", str(store))
        settings.set("IMG_CACHE_DIR", str(Path(tmp, "cache")))
        proxy = ImageProxy.from_settings(settings)
        app = FastAPI()
        app.include_router(image_router(proxy=proxy))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
        threading.Thread(target=server.run, daemon=True).start()
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}/img/"
        with ThreadPoolExecutor(args.heavy) as pool:
            heavy = [
                pool.submit(http, "GET", f"{base}{big}?{HEAVY}&q={50 + n}", timeout=600) for n in range(args.heavy)
            ]
            time.sleep(0.3)  # the heavy ones under way
            started = time.monotonic()
            # another client: from 127.0.0.2 (the heavy ones come from 127.0.0.1)
            other = HTTPConnection("127.0.0.1", port, timeout=600, source_address=("127.0.0.2", 0))
            other.request("GET", f"/img/{small}?w=200")
            thumb = other.getresponse()
            thumb.read()
            waited = time.monotonic() - started
            statuses = sorted(f.result().status for f in heavy)
        server.should_exit = True
    print(f"thumbnail: HTTP {thumb.status} after {waited:.2f} s; {args.heavy} heavy requests: {statuses}")


if __name__ == "__main__":
    main()
