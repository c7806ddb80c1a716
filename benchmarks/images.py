"""Image benchmark, one run: /img against sharp (the seed's resizer, libvips too), and the
pipeline's webp conversion before (Pillow) and after (libvips).

    python benchmarks/images.py                      # 200 sources, 10,000 cached requests
    python benchmarks/images.py --sources 100 --requests 5000 --concurrency 16

On the same photo-like 1000×1000 webp sources, 200-px webp q80 thumbnails (`?w=200`), with the
same number of threads everywhere (`--threads`, one per core by default):

- bare libvips: cannaspider/images/render.py's render() in a thread pool, no HTTP, no cache;
- sharp: when `node` and `npm` are on PATH, sharp@0.35.5 is installed from the npm registry
  into a temporary folder and renders the same files, `--threads` at a time (UV_THREADPOOL_SIZE),
  one libvips thread each and no cache, as VIPS_CONCURRENCY and VIPS_CACHE_* configure ours;
- /img cold (each variant's first render) and cached: the server (uvicorn + the /img router built
  from the project's settings, as `scrapy serve` mounts it) in a child process on 127.0.0.1, loaded
  by an aiohttp client loop in this one; its RSS sampled over `--cold-variants` further first
  renders and over `--requests` cached requests;
- the pipeline's conversion of downloaded JPEGs (1000×1000, q85) to the stored webp (q90):
  benchmarks/pillow_convert.py (Pillow) against cannaspider/images/convert.py.

Targets (docs/images.md, "Speed"): bare libvips >= 1.0x sharp; cold /img >= 0.85x sharp; cached
>= 20x cold; memory flat; libvips conversion faster than Pillow's.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import psutil
from PIL import Image, ImageDraw, ImageFilter
from scrapy.settings import BaseSettings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import pillow_convert  # noqa: E402
from cannaspider.images import convert  # noqa: E402
from cannaspider.images.render import Variant, render  # noqa: E402

SHARP = "sharp@0.35.5"
THUMB = Variant(w=200)
SHARP_SCRIPT = r"""
const sharp = require("sharp");
const files = JSON.parse(process.argv[2]);
const threads = Number(process.argv[3]);
sharp.cache(false);
sharp.concurrency(1);
const thumb = (f) => sharp(f).resize({ width: 200 }).webp({ quality: 80 }).toBuffer();
(async () => {
  await thumb(files[0]);
  const queue = files.slice();
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: threads }, async () => {
    while (queue.length) await thumb(queue.pop());
  }));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(JSON.stringify({ rate: files.length / seconds, vips: sharp.versions.vips }));
})();
"""


def project_settings(**overrides):
    settings = BaseSettings()
    settings.setmodule("cannaspider.settings", priority="project")
    settings.update(overrides, priority="cmdline")
    return settings


def photo(rng: random.Random, side: int) -> Image.Image:
    """A photo-like product shot: a gradient, shapes, noise, smoothed."""
    image = Image.linear_gradient("L").resize((side, side)).convert("RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y, r = rng.randrange(side), rng.randrange(side), rng.randrange(20, side // 3)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(rng.randrange(256) for _ in range(3)))
    noise = Image.effect_noise((side, side), 24).convert("RGB")
    return Image.blend(image, noise, 0.15).filter(ImageFilter.SMOOTH)


def make_sources(store: Path, count: int, side: int) -> tuple[list[str], list[bytes]]:
    """The stored webp files (at the pipeline's quality) and the same photos as downloaded JPEGs."""
    rng = random.Random(7)
    paths, jpegs = [], []
    for i in range(count):
        image = photo(rng, side)
        rel = f"products/az/bench-store/bench-brand/{i:024x}/image-{i:08x}.webp"
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        image.save(store / rel, "WEBP", quality=90)
        paths.append(rel)
        buf = io.BytesIO()
        image.save(buf, "JPEG", quality=85)
        jpegs.append(buf.getvalue())
    return paths, jpegs


def rate(func: Callable, items: list, threads: int) -> float:
    """Items per second through func, `threads` at a time (after one warm-up call)."""
    func(items[0])
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(func, items):
            pass
    return len(items) / (time.perf_counter() - started)


def sharp_rate(files: list[Path], threads: int, folder: Path) -> tuple[float | None, str]:
    """sharp's thumbnails per second on the same files, or None and why not."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return None, "node/npm not on PATH"
    install = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(folder), SHARP],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode != 0:
        return None, f"npm install {SHARP} failed: {install.stderr.strip().splitlines()[-1:]}"
    script = folder / "thumbs.js"
    script.write_text(SHARP_SCRIPT)
    run = subprocess.run(
        [node, str(script), json.dumps([str(f) for f in files]), str(threads)],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "UV_THREADPOOL_SIZE": str(threads)},
        timeout=600,
    )
    if run.returncode != 0:
        return None, f"sharp failed: {run.stderr.strip()[-300:]}"
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return result["rate"], f"{SHARP}, libvips {result['vips']}"


def serve(store: str, cache: str, port: int, threads: int) -> None:
    import uvicorn  # noqa: PLC0415 - the web stack, in the server's child process only
    from fastapi import FastAPI  # noqa: PLC0415 - as uvicorn

    from cannaspider.web.images import ImageProxy, image_router  # noqa: PLC0415 - as uvicorn

    settings = project_settings(IMAGES_STORE=store, IMG_CACHE_DIR=cache, IMG_RENDER_THREADS=threads)
    app = FastAPI()
    app.include_router(image_router(proxy=ImageProxy.from_settings(settings)))
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


def start_server(store: Path, cache: Path, threads: int) -> tuple[multiprocessing.Process, int]:
    port = free_port()
    server = multiprocessing.get_context("spawn").Process(
        target=serve, args=(str(store), str(cache), port, threads), daemon=True
    )
    server.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            if time.monotonic() > deadline:
                server.terminate()
                raise SystemExit("the server did not start") from None
            time.sleep(0.1)


def rss_line(label: str, samples: list[float]) -> str:
    growth = samples[-1] - samples[0] if len(samples) > 1 else 0.0
    shown = " ".join(f"{m:.0f}" for m in samples)
    return f"{label}: {shown} MiB (first to last sample {growth:+.1f} MiB)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=int, default=200, help="distinct stored images (cold renders)")
    parser.add_argument("--side", type=int, default=1000, help="stored image size (px, square)")
    parser.add_argument("--requests", type=int, default=10_000, help="cached requests")
    parser.add_argument("--cold-variants", type=int, default=1000, help="further first renders, for memory")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="render threads, everywhere")
    parser.add_argument("--no-sharp", action="store_true", help="skip sharp (its npm install needs the registry)")
    args = parser.parse_args()
    convert.configure(project_settings())

    with tempfile.TemporaryDirectory(prefix="img-bench-") as tmp:
        store, cache = Path(tmp) / "store", Path(tmp) / "cache"
        paths, jpegs = make_sources(store, args.sources, args.side)
        files = [store / p for p in paths]
        sharp, sharp_about = (
            (None, "--no-sharp") if args.no_sharp else sharp_rate(files, args.threads, Path(tmp) / "sharp")
        )
        settings = project_settings()
        max_pixels, source_max_pixels = settings.getint("IMG_MAX_PIXELS"), settings.getint("IMAGES_MAX_PIXELS")
        webp = {"quality": settings.getint("IMAGES_WEBP_QUALITY"), "max_pixels": source_max_pixels}
        bare = rate(lambda f: render(f, THUMB, max_pixels, source_max_pixels), files, args.threads)
        before = rate(lambda b: pillow_convert.to_webp(b, **webp), jpegs, args.threads)
        after = rate(lambda b: convert.to_webp(b, **webp), jpegs, args.threads)

        server, port = start_server(store, cache, args.threads)
        base = f"http://127.0.0.1:{port}/img/"
        pid = server.pid or 0
        try:
            thumbs = [f"{p}?w=200" for p in paths]
            cold_s, _ = asyncio.run(load(base, thumbs, args.concurrency))
            cold = len(thumbs) / cold_s
            more = [f"{paths[i % len(paths)]}?w={201 + i // len(paths)}" for i in range(args.cold_variants)]
            _, cold_rss = asyncio.run(load(base, more, args.concurrency, sample_every=max(1, len(more) // 10), pid=pid))
            asyncio.run(load(base, thumbs, args.concurrency))  # warm the connection pool and caches
            cached_urls = [thumbs[i % len(thumbs)] for i in range(args.requests)]
            cached_s, rss = asyncio.run(
                load(base, cached_urls, args.concurrency, sample_every=max(1, args.requests // 10), pid=pid)
            )
            cached = args.requests / cached_s
            threads_after = psutil.Process(pid).num_threads()
        finally:
            server.terminate()
            server.join(10)

    print(f"sources: {args.sources} webp {args.side}x{args.side}; thumbnails ?w=200 (webp q80); "
          f"{args.threads} threads everywhere; {args.concurrency} concurrent clients")  # fmt: skip
    if sharp is None:
        print(f"sharp                        (not measured: {sharp_about})")
    else:
        print(f"sharp ({sharp_about})  {sharp:9.1f} thumbnails/s")
    print(f"bare libvips render()        {bare:9.1f} thumbnails/s", end="")
    print(f"   {bare / sharp:5.2f}x sharp   (target >= 1.00)" if sharp else "")
    print(f"/img cold (first render)     {cold:9.1f} thumbnails/s", end="")
    print(f"   {cold / sharp:5.2f}x sharp   (target >= 0.85)" if sharp else f"   {cold / bare:5.2f}x bare")
    print(f"/img cached                  {cached:9.1f} thumbnails/s   {cached / cold:5.1f}x cold    (target >= 20)")
    print(rss_line(f"server RSS over {args.cold_variants} more first renders", cold_rss))
    print(rss_line(f"server RSS over {args.requests} cached requests", rss))
    print(f"server threads at the end: {threads_after}")
    print(f"pipeline conversion, {args.sources} JPEG {args.side}x{args.side} -> webp q90, {args.threads} threads:")
    print(f"  before (Pillow)            {before:9.1f} images/s")
    print(f"  after (libvips)            {after:9.1f} images/s   {after / before:5.2f}x before")


if __name__ == "__main__":
    main()
