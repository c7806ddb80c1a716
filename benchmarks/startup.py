"""The start-up of a `scrapy` process: CPU and wall seconds of `scrapy list` and `scrapy version`
against `python -c "import scrapy"`, the floor every Scrapy process pays (docs/architecture.md,
"Start-up").

Every `scrapy` process imports the modules of every command (cannaspider/commands and the
sandbox's entry points) and every spider module, whatever it runs: what one of them imports at its
top, each `scrapy crawl`, each Scrapyd job and each of the test suite's crawls pays. The commands
run in turn (list, version, the baseline, list, …) so that a shared machine's drift falls on all
three; each figure is the median of --runs, its CPU the process's own (user + system, from the
kernel's accounting of the reaped child), and the ratio is the command's median CPU over the
baseline's.

    .venv/bin/python benchmarks/startup.py [--runs 15] [--warmup 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "scrapy list": [sys.executable, "-m", "scrapy", "list"],
    "scrapy version": [sys.executable, "-m", "scrapy", "version"],
    "import scrapy": [sys.executable, "-c", "import scrapy"],
}
BASELINE = "import scrapy"


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `argv`, which must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} exited {result.returncode}:\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="counted runs of each command")
    parser.add_argument("--warmup", type=int, default=2, help="runs of each, first, not counted")
    args = parser.parse_args()
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs is at least 1, --warmup at least 0")
    with tempfile.TemporaryDirectory(prefix="cannaspider-startup-") as data:
        # as a user's shell runs them: no SCRAPY_* variable; local state kept out of the checkout
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
        env["CANNASPIDER_DATA_DIR"] = data
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
        for n in range(args.warmup + args.runs):
            for name, argv in COMMANDS.items():
                figure = run_once(argv, env)
                if n >= args.warmup:
                    figures[name].append(figure)
    cpu = {name: statistics.median(c for c, _ in runs) for name, runs in figures.items()}
    wall = {name: statistics.median(w for _, w in runs) for name, runs in figures.items()}
    print(f"start-up, median of {args.runs} run(s) each (CPU: user + system of the process)")
    for name in COMMANDS:
        ratio = "" if name == BASELINE else f"   {cpu[name] / cpu[BASELINE]:.2f} x import scrapy (CPU)"
        print(f"  {name:<15} CPU {cpu[name]:6.3f} s   wall {wall[name]:6.3f} s{ratio}")


if __name__ == "__main__":
    main()
