"""Builds the compiled twin of cannaspider/dutchie/normalizer.py with Cython (optional).

Normalizing runs once per product of every crawl and is the biggest cost the product pipelines
add to a crawl. normalizer.py is plain Python and stays the only source: this compiles a copy of
it, stamped with the SHA-256 of the source it came from, into
cannaspider/dutchie/_normalizer_compiled.<abi>.so (git-ignored). normalizer.py swaps in the twin's
functions only when that stamp matches its own source, so an edited normalizer.py is never
shadowed by a stale build; without a C compiler, or where the twin cannot load (a Scrapyd egg is a
zip), everything runs as plain Python, with the same results (tests/dutchie/test_normalizer.py
compares the two on every sandbox product and on broken ones).

    python -m cannaspider.speedups            build, unless the twin is already up to date
    python -m cannaspider.speedups --status   which normalizer this process would use

`./dev setup` runs the first form.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SOURCE = PACKAGE_DIR / "dutchie" / "normalizer.py"
TWIN = "_normalizer_compiled"
TWIN_MODULE = f"cannaspider.dutchie.{TWIN}"


def source_sha256(source: bytes) -> str:
    return hashlib.sha256(source).hexdigest()


def twin_is_current() -> bool:
    try:
        twin = importlib.import_module(TWIN_MODULE)
    except ImportError:
        return False
    return getattr(twin, "SOURCE_SHA256", None) == source_sha256(SOURCE.read_bytes())


def build() -> Path:
    """Compile the twin next to normalizer.py; raises on any failure (the caller reports it)."""
    source = SOURCE.read_bytes()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with tempfile.TemporaryDirectory(prefix="cannaspider-speedups-") as tmp:
        copy = Path(tmp) / f"{TWIN}.py"
        copy.write_bytes(source + f'\n\nSOURCE_SHA256 = "{source_sha256(source)}"\n'.encode())
        # `cythonize -i` builds in place, in the temporary folder: nothing but the .so reaches the tree
        result = subprocess.run(
            [sys.executable, "-m", "Cython.Build.Cythonize", "-3", "-i", "-q", str(copy)],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        built = Path(tmp) / f"{TWIN}{suffix}"
        if result.returncode != 0 or not built.exists():
            output = (result.stderr or result.stdout).strip().splitlines()
            raise RuntimeError(output[-1] if output else f"cythonize exited {result.returncode}")
        target = SOURCE.parent / built.name
        shutil.copyfile(built, target.with_suffix(".tmp"))
        target.with_suffix(".tmp").replace(target)  # never a half-written module in the tree
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cannaspider.speedups", description=__doc__.splitlines()[0])
    parser.add_argument("--status", action="store_true", help="say which normalizer is in use, build nothing")
    args = parser.parse_args(argv)
    if args.status:
        from cannaspider.dutchie import normalizer

        print(f"normalizer: {normalizer.IMPLEMENTATION}")
        return 0
    if twin_is_current():
        return 0
    try:
        target = build()
    except Exception as exc:  # no compiler, no Cython, no headers: plain Python it is
        print(
            f"warning: the compiled normalizer was not built ({exc}); crawls use plain Python, "
            "about a quarter slower per product",
            file=sys.stderr,
        )
        return 0
    print(f"built {target.relative_to(PACKAGE_DIR.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
