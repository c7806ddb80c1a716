"""/img benchmark: 200-px webp thumbnails per second, cold (each variant's first render) and
cached, against a bare Pillow loop doing the same resize (the ceiling); and the server's memory
over 10,000 cached requests.

    python benchmarks/images.py                      # 200 sources, 10,000 cached requests
    python benchmarks/images.py --sources 100 --requests 5000 --concurrency 16

The server (uvicorn + the /img router, as `scrapy serve` mounts it) runs as a child process on
127.0.0.1; the load comes from an aiohttp client loop in this process. Targets (docs/images.md):
cached ≥ 20× cold; cold ≥ 60 % of the bare Pillow loop (given the same threads); memory flat.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import socket
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import psutil
from PIL import Image, ImageDraw, ImageFilter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cannaspider.web.images import Variant, render  # noqa: E402

THUMB = Variant(w=200)


def make_sources(store: Path, count: int, side: int) -> list[str]:
    """Photo-like product shots (gradients, shapes, noise): webp at the pipeline's quality."""
    rng = random.Random(7)
    paths = []
    for i in range(count):
        image = Image.linear_gradient("L").resize((side, side)).convert("RGB")
        draw = ImageDraw.Draw(image)
        for _ in range(12):
            x, y, r = rng.randrange(side), rng.randrange(side), rng.randrange(20, side // 3)
            draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(rng.randrange(256) for _ in range(3)))
        noise = Image.effect_noise((side, side), 24).convert("RGB")
        image = Image.blend(image, noise, 0.15).filter(ImageFilter.SMOOTH)
        rel = f"products/az/bench-store/bench-brand/{i:024x}/image-{i:08x}.webp"
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        image.save(store / rel, "WEBP", quality=90)
        paths.append(rel)
    return paths


def serve(store: str, cache: str, port: int, threads: int) -> None:
    import uvicorn  # noqa: PLC0415
    from fastapi import FastAPI  # noqa: PLC0415

    from cannaspider.web.images import ImageProxy, image_router  # noqa: PLC0415

    app = FastAPI()
    app.include_router(image_router(proxy=ImageProxy(Path(store), Path(cache), threads=threads)))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def load(base: str, urls: list[str], concurrency: int, sample_every: int = 0, pid: int = 0):
    """Request every URL (concurrency at a time); returns (seconds, RSS samples in MiB)."""
    queue = list(reversed(urls))
    samples: list[float] = []
    done = 0
    process = psutil.Process(pid) if pid else None
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal done
            while queue:
                url = queue.pop()
                async with session.get(base + url) as reply:
                    body = await reply.read()
                    if reply.status != 200 or not body:
                        raise RuntimeError(f"{url}: HTTP {reply.status}")
                done += 1
                if process and sample_every and done % sample_every == 0:
                    samples.append(process.memory_info().rss / 2**20)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, samples


def bare_pillow(store: Path, paths: list[str], threads: int) -> float:
    """The same resize and encode (render()), no HTTP, no cache: thumbnails per second."""
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(lambda p: render(store / p, THUMB, 16_000_000), paths):
            pass
    return len(paths) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=int, default=200, help="distinct stored images (cold renders)")
    parser.add_argument("--side", type=int, default=1000, help="stored image size (px, square)")
    parser.add_argument("--requests", type=int, default=10_000, help="cached requests")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="render threads (server and loop)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="img-bench-") as tmp:
        store, cache = Path(tmp) / "store", Path(tmp) / "cache"
        paths = make_sources(store, args.sources, args.side)
        bare = bare_pillow(store, paths, args.threads)

        port = free_port()
        server = multiprocessing.get_context("spawn").Process(
            target=serve, args=(str(store), str(cache), port, args.threads), daemon=True
        )
        server.start()
        base = f"http://127.0.0.1:{port}/img/"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.1)
        try:
            thumbs = [f"{p}?w=200" for p in paths]
            cold_s, _ = asyncio.run(load(base, thumbs, args.concurrency))
            cold = len(thumbs) / cold_s
            asyncio.run(load(base, thumbs, args.concurrency))  # warm the connection pool and caches
            cached_urls = [thumbs[i % len(thumbs)] for i in range(args.requests)]
            cached_s, rss = asyncio.run(
                load(base, cached_urls, args.concurrency, sample_every=max(1, args.requests // 10), pid=server.pid or 0)
            )
            cached = args.requests / cached_s
        finally:
            server.terminate()
            server.join(10)

    print(f"sources: {args.sources} webp {args.side}x{args.side}; thumbnails ?w=200 (webp q80); "
          f"{args.threads} render threads; {args.concurrency} concurrent clients")  # fmt: skip
    print(f"bare Pillow loop (ceiling)  {bare:9.1f} thumbnails/s")
    print(f"/img cold (first render)    {cold:9.1f} thumbnails/s   {cold / bare:6.1%} of the loop   (target >= 60 %)")
    print(f"/img cached                 {cached:9.1f} thumbnails/s   {cached / cold:6.1f}x cold   (target >= 20x)")
    growth = rss[-1] - rss[0] if len(rss) > 1 else 0.0
    print(
        f"server RSS over {args.requests} cached requests: "
        + " ".join(f"{m:.0f}" for m in rss)
        + f" MiB (first to last sample {growth:+.1f} MiB)"
    )


if __name__ == "__main__":
    main()
