"""The normalizer's output, byte for byte, on the sandbox catalog and on broken variants of it, against
a snapshot taken before the normalizer was tuned for speed (normalizer_golden.json): a speed-up
must change nothing a product carries, what it lost (storable.py), nor the count of
refused URLs. A deliberate change of the output regenerates the snapshot:

    .venv/bin/python -m tests.platforms.dutchie.test_normalizer_golden > tests/platforms/dutchie/normalizer_golden.json
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from pathlib import Path
from typing import Any

from cannaspider import storable
from cannaspider.items import RawProduct
from cannaspider.platforms.dutchie.normalizer import STORABLE_CACHES, NormalizationError, normalize
from sandbox.catalog import _product
from tests.platforms.dutchie.test_normalizer import FUZZ

GOLDEN = Path(__file__).with_name("normalizer_golden.json")


class Recorder(storable.DegradationLog):
    def __init__(self) -> None:
        super().__init__()
        self.reports: list[tuple[str, list[str]]] = []

    def report(self, pid: str, what: list[str]) -> None:
        self.reports.append((pid, what))


def payloads() -> list[dict[str, Any]]:
    """400 sandbox products over 5 epochs, and 6 broken variants of each of 200 (as the fuzz test of
    test_normalizer.py breaks them: top-level and nested fields)."""
    rng = random.Random(11)
    out = [_product(42, f"store-{i % 3}", i, i % 5, "http://127.0.0.1:1") for i in range(400)]
    for index in range(200):
        raw = _product(42, "fuzz", index, index % 4, "http://127.0.0.1:1")
        for _ in range(6):
            broken = copy.deepcopy(raw)
            broken[rng.choice(list(broken))] = rng.choice(FUZZ)
            for key in ("THCContent", "POSMetaData", "specialData", "recPrices", "cannabinoidsV2", "effects", "brand"):
                value = broken.get(key)
                if value and isinstance(value, (dict, list)) and rng.random() < 0.4:
                    if isinstance(value, dict):
                        value[rng.choice(list(value))] = rng.choice(FUZZ)
                    else:
                        value[0] = rng.choice(FUZZ)
            out.append(broken)
    return out


def outputs() -> list[str]:
    """Per payload, a digest of the product's repr (types included: 1 and 1.0 differ), what it lost
    and the URLs refused; or of the error it raised."""
    recorder = Recorder()
    losses = storable.Losses(recorder)
    for cached in STORABLE_CACHES:
        cached.cache_clear()  # a string repaired in a cache is reported once: start as a fresh process
    digests = []
    for raw in payloads():
        refused = losses.refused_urls
        recorder.reports.clear()
        try:
            text = repr(normalize(RawProduct(dispensary_id=7, crawl_run_id=3, raw=copy.deepcopy(raw)), losses))
        except NormalizationError as exc:
            text = f"NormalizationError: {exc}"
        text += f"|{recorder.reports!r}|{losses.refused_urls - refused}"
        digests.append(hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:16])
    return digests


def test_the_output_is_the_snapshots():
    expected = json.loads(GOLDEN.read_text())
    got = outputs()
    assert len(got) == len(expected) == 1600
    differing = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not differing, f"payloads {differing[:20]} normalize differently (see payloads())"


if __name__ == "__main__":
    print(json.dumps(outputs(), indent=0))
