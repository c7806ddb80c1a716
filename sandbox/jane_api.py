"""A Jane-like Algolia host (aiohttp) for both of Jane's indexes, over a deterministic catalog.

The stores sit in the cities of the Dutchie catalog's stores (sandbox/catalog.py), and their menus
draw on the same product library, so the same brands and products are sold through both platforms
(under Jane's spellings: its weights, its kinds, its brand field). Documents carry the fields of
the real products index (docs/jane.md, "Products"); a store document the fields docs/jane.md
lists for the stores index.

It answers as Algolia does: POST /1/indexes/<index>/query with a JSON body; the application id
and key headers are checked (a wrong one: Algolia's JSON 403); `hitsPerPage` above 1000 is
Algolia's 400. Its faults, set over /_sandbox/jane/faults (sandbox/faults.py): block403 (an edge's
HTML page), error500, rate_limited (429), malformed, and on menus lying_total, duplicates (a page
repeats the previous one), endless (pages never run out), empty_menu, short_page (a page loses a
product), total_changed (nbHits moves after the first page), oversized (a 50 MB page: its first hit
carries a 50 MB description), oversized_cut (that page cut in half) and no_id (the page's first hit
without its product_id).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from aiohttp import web

from sandbox.catalog import Catalog, CatalogConfig, ProductTruth, _product, h, product_truth
from sandbox.faults import OVERSIZED_BYTES, FaultSwitchboard

APP_ID = "VFM4X0N23A"  # the real defaults (cannaspider/settings.py): a crawl needs no override
API_KEY = "edc5435c65d771cecbd98bbd488aa8d3"
PRODUCTS_INDEX = "menu-products-production"
STORES_INDEX = "stores-production"
MAX_HITS_PER_PAGE = 1000
STORE_ID_BASE = 4000
ENDLESS_HITS = 1_000_000  # the endless fault's nbHits: more pages than any cap allows
# Dutchie catalog's kinds and option strings in Jane's words
KINDS = {
    "Flower": "flower",
    "Pre-Rolls": "pre-roll",
    "Vaporizers": "vape",
    "Concentrate": "extract",
    "Edible": "edible",
    "Tincture": "tincture",
    "Topicals": "topical",
    "Accessories": "gear",
}
WEIGHT_OF_OPTION = {
    ".5g": "half gram",
    "1g": "gram",
    "1gC": "gram",
    "3.5g": "eighth ounce",
    "1/8oz": "eighth ounce",
    "7g": "quarter ounce",
    "1/4oz": "quarter ounce",
    "14g": "half ounce",
    "1/2oz": "half ounce",
    "1oz": "ounce",
}
LINEAGES = {"Indica": "indica", "Sativa": "sativa", "Hybrid": "hybrid", "High CBD": "cbd"}


@dataclass(frozen=True)
class JaneStore:
    id: int
    state: str
    name: str
    slug: str
    city: str
    lat: float
    lng: float
    zipcode: str
    product_count: int
    recreational: bool
    medical: bool


class JaneCatalog:
    """Jane's stores (in the Dutchie catalog's cities) and their menus, evolving by epoch as the
    Dutchie catalog's do (Catalog.present)."""

    def __init__(self, config: CatalogConfig = CatalogConfig()):
        self.config = config
        self.dutchie = Catalog(config)
        self.stores: list[JaneStore] = []
        for s, state in enumerate(config.states):
            dutchie_stores = [d for d in self.dutchie.stores if d.state == state]
            for i in range(config.jane_stores_per_state):
                near = dutchie_stores[i % len(dutchie_stores)]
                jitter = (h(config.seed, "jane", state, i, "lat") % 2000 - 1000) / 40000.0
                name = f"Jane Greenhouse {near.city} #{i + 1}"
                span = config.max_products - config.min_products
                self.stores.append(
                    JaneStore(
                        id=STORE_ID_BASE + s * 100 + i,
                        state=state,
                        name=name,
                        slug=name.lower().replace(" ", "-").replace("#", ""),
                        city=near.city,
                        lat=round(near.lat + jitter, 6),
                        lng=round(near.lng - jitter, 6),
                        zipcode=near.zipcode,
                        product_count=config.min_products
                        + (h(config.seed, "jane", state, i, "n") % (span + 1) if span else 0),
                        recreational=i % 4 != 3,
                        medical=i % 3 != 1,
                    )
                )
        self.by_id = {str(store.id): store for store in self.stores}

    def find(self, key: object) -> JaneStore | None:
        return self.by_id.get(str(key).strip())

    def store_document(self, store: JaneStore) -> dict:
        return {
            "objectID": str(store.id),
            "id": store.id,
            "name": store.name,
            "url_slug": store.slug,
            "address": f"{200 + store.id % 100} E Jane St",
            "full_address": f"{200 + store.id % 100} E Jane St, {store.city}, {store.state} {store.zipcode}",
            "city": store.city,
            "state": store.state,
            "zip": store.zipcode,
            "phone": f"(480) 555-{store.id % 10000:04d}",
            "recreational": store.recreational,
            "medical": store.medical,
            "time_zone_identifier": "America/Phoenix" if store.state == "AZ" else "America/Detroit",
            "_geoloc": {"lat": store.lat, "lng": store.lng},
        }

    def product_indices(self, store: JaneStore, epoch: int) -> list[int]:
        present, key = self.dutchie.present, jane_key(store.id)
        return [i for i in range(store.product_count) if present(store, i, epoch, key)]  # type: ignore[arg-type]

    def product_ids(self, store: JaneStore, epoch: int) -> list[str]:
        return [str(product_id(store.id, i)) for i in self.product_indices(store, epoch)]

    def hit(self, store: JaneStore, index: int, epoch: int, base: str) -> dict:
        return hit(self.config.seed, store.id, index, epoch, base, (store.lat, store.lng))

    def truth(self, store: JaneStore, index: int) -> ProductTruth:
        """What the store's product `index` really is: a library product is the one Dutchie's
        stores sell under the same 'library:<k>' (sandbox/matching.py measures against it)."""
        return product_truth(self.config.seed, jane_key(store.id), index)


def jane_key(store_id: int) -> str:
    """The key a Jane store's menu is drawn under from the Dutchie catalog's library (_product)."""
    return f"jane-{store_id}"


# how a size is written after a product's name on Jane's menus ('Blue Dream 3.5g', 'Blue Dream
# (1/8 oz)', 'Blue Dream - Eighth'): the weight's name → its spellings
SIZE_SPELLINGS = {
    "half gram": (".5g", "(0.5 g)", "- Half Gram"),
    "gram": ("1g", "(1 gram)", "- 1g"),
    "eighth ounce": ("3.5g", "(1/8 oz)", "- Eighth"),
    "quarter ounce": ("7g", "(1/4 oz)", "- Quarter"),
    "half ounce": ("14g", "(1/2 oz)", "- Half Ounce"),
    "ounce": ("28g", "(1 oz)", "- Ounce"),
}


def jane_brand_spelling(brand: str, r) -> str:
    """The brand as a Jane menu writes it: as Dutchie's do, or in capitals, in lower case, with
    its company's suffix written otherwise ('Mohave Cannabis Co.' → 'Mohave Cannabis Company'; a
    brand without one gets ' Co.'), or without punctuation."""
    spelling = r("jane-brand-spell") % 10
    if spelling == 0:
        return brand.upper()
    if spelling == 1:
        return brand.lower()
    if spelling == 2:
        return brand.replace(" Co.", " Company") if brand.endswith(" Co.") else f"{brand} Co."
    if spelling == 3:
        return "".join(c for c in brand if c.isalnum() or c == " ")
    return brand


def jane_name_spelling(name: str, brand: str, weights: list[str], r) -> str:
    """The product's name as a Jane menu writes it: as it is, led by its brand ('Kiva - Camino
    Gummies'), followed by its first weight ('Blue Dream (1/8 oz)'), or in title case."""
    spelling = r("jane-name-spell") % 8
    if spelling == 0:
        return f"{brand} - {name}"
    if spelling == 1 and weights and weights[0] in SIZE_SPELLINGS:
        spellings = SIZE_SPELLINGS[weights[0]]
        return f"{name} {spellings[r('jane-size-spell') % len(spellings)]}"
    if spelling == 2:
        return name.title()
    return name


def product_id(store_id: int, index: int) -> int:
    return 1_000_000 + (h("jane", store_id, index) % 9_000_000)


@lru_cache(maxsize=100_000)
def hit(seed: int, store_id: int, index: int, epoch: int, base: str, geo: tuple[float, float] = (0.0, 0.0)) -> dict:
    """One products-index document, from the Dutchie catalog's product `index` of a store keyed by
    this Jane store (the library products among them are the ones Dutchie's stores sell too)."""
    d = _product(seed, jane_key(store_id), index, epoch, base)
    r = lambda *k: h(seed, "jane", store_id, index, *k)  # noqa: E731 - a local shorthand
    options, prices = d["Options"], d["recPrices"]
    raws = d["rawOptions"] or options
    weights: list[str] = []
    doc: dict = {}
    for j, option in enumerate(options):
        weight = WEIGHT_OF_OPTION.get(raws[j] if j < len(raws) else option) or WEIGHT_OF_OPTION.get(option) or "each"
        if weight in weights:
            continue
        weights.append(weight)
        suffix = weight.replace(" ", "_")
        doc[f"price_{suffix}"] = prices[j]
        doc[f"discounted_price_{suffix}"] = None
        doc[f"special_price_{suffix}"] = d["recSpecialPrices"][j] if d["recSpecialPrices"] else None
        doc[f"max_cart_quantity_{suffix}"] = 1 + r("cart", suffix) % 10
    thc = (d["THCContent"] or {}).get("range")
    percent = thc[0] if thc and d["THCContent"]["unit"] == "PERCENTAGE" else None
    pid = product_id(store_id, index)
    on_special = bool(d["recSpecialPrices"])
    image = d["Image"]
    # the brand and name in Jane's spellings (ground truth: JaneCatalog.truth); Jane's brand id is
    # the brand's whatever the spelling, and some products come without one
    true_brand = product_truth(seed, jane_key(store_id), index).brand
    brand = d["brandName"]
    if brand == true_brand:
        brand = jane_brand_spelling(brand, r)
    brand_id = h("jane-brand", true_brand) % 100_000 if r("jane-nobrandid") % 4 else None
    name = jane_name_spelling(d["Name"], brand, weights, r)
    doc.update(
        {
            "objectID": f"{store_id}-{pid}",
            "product_id": pid,
            "store_id": store_id,
            "name": name,
            "brand": brand,
            "product_brand_id": brand_id,
            "brand_logo_url": (d["brand"] or {}).get("imageUrl"),
            "kind": KINDS[d["type"]],
            "kind_subtype": (d["subcategory"] or "").replace("-", " ").title() or None,
            "root_subtype": (d["subcategory"] or "").replace("-", " ").title() or None,
            "category": LINEAGES.get(d["strainType"] or ""),
            "available_weights": weights,
            "percent_thc": percent,
            "percent_cbd": 0.1 if r("cbd") % 2 else None,
            "lab_results": [
                {
                    "price_id": weights[0] if weights else "each",
                    "lab_results": [{"compound_name": "thc", "value": percent, "unit_type": "percentage"}],
                }
            ]
            if percent is not None
            else [],
            "special_id": 900 + r("special") % 50 if on_special else None,
            "special_title": "20% off " + d["type"] if on_special else None,
            "special_amount": 20 if on_special else None,
            "applicable_special_ids": [900 + r("special") % 50] if on_special else [],
            "effects": ["Relaxed", "Happy"] if r("eff") % 3 else [],
            "photos": [{"id": image, "position": 0, "urls": {"original": image, "small": image}}] if image else [],
            "image_urls": [image] if image else [],
            "_geoloc": {"lat": geo[0], "lng": geo[1]},
        }
    )
    return doc


# -- the server ----------------------------------------------------------------------------------


class JaneState:
    def __init__(self, catalog: JaneCatalog, seed: int = 0):
        self.catalog = catalog
        self.epoch = 0
        self.faults = FaultSwitchboard(seed)
        self.requests: Counter[str] = Counter()  # by index
        self.pages: Counter[int] = Counter()  # products pages asked for, by page number

    def reset(self) -> None:
        self.epoch = 0
        self.faults.clear()
        self.requests.clear()
        self.pages.clear()


JANE = web.AppKey("jane", JaneState)
BLOCK_PAGE = "<!DOCTYPE html><html><head><title>Attention Required!</title></head><body>blocked</body></html>"


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def _error(message: str, status: int) -> web.Response:
    return _json({"message": message, "status": status}, status)


def _store_of(filters: str) -> str | None:
    """The store id of `store_id = 123` or `store_id:"123"` (the filters our crawl sends)."""
    text = filters.replace(" ", "")
    for prefix in ("store_id=", "store_id:"):
        if text.startswith(prefix):
            return text[len(prefix) :].strip('"')
    return None


def _distance_m(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lng2 - lng1) / 2) ** 2
    return 2 * 6_371_000 * math.asin(math.sqrt(a))


async def query(request: web.Request) -> web.StreamResponse:
    state = request.app[JANE]
    index = request.match_info["index"]
    state.requests[index] += 1
    if request.headers.get("x-algolia-application-id") != APP_ID or request.headers.get("x-algolia-api-key") != API_KEY:
        return _error("Invalid Application-ID or API key", 403)
    try:
        params = json.loads(await request.read() or b"{}")
        assert isinstance(params, dict)
    except (ValueError, AssertionError):
        return _error("Invalid JSON body", 400)
    per_page = params.get("hitsPerPage", 20)
    page = params.get("page", 0)
    if not isinstance(per_page, int) or not 0 <= per_page <= MAX_HITS_PER_PAGE:
        return _error(f"hitsPerPage must be between 0 and {MAX_HITS_PER_PAGE}", 400)
    if not isinstance(page, int) or page < 0:
        return _error("page must be a non-negative integer", 400)
    store = _store_of(str(params.get("filters") or "")) if index == PRODUCTS_INDEX else None
    fired = {
        rule.kind: rule
        for rule in state.faults.fire(
            (
                "block403",
                "error500",
                "rate_limited",
                "malformed",
                "lying_total",
                "duplicates",
                "endless",
                "empty_menu",
                "short_page",
                "total_changed",
                "oversized",
                "oversized_cut",
                "no_id",
            ),
            index,
            (store,) if store else (),
            page if index == PRODUCTS_INDEX else None,
        )
    }
    if "block403" in fired:
        return web.Response(text=BLOCK_PAGE, status=403, content_type="text/html")
    if "rate_limited" in fired:
        retry = fired["rate_limited"].retry_after
        return web.Response(
            text=json.dumps({"message": "Too many requests", "status": 429}),
            status=429,
            content_type="application/json",
            headers={"Retry-After": retry} if retry else None,
        )
    if "error500" in fired:
        return _error("Internal Server Error", 500)
    if "malformed" in fired:
        return web.Response(text='{"hits": [', content_type="application/json")
    base = f"{request.scheme}://{request.host}"
    if index == STORES_INDEX:
        return _json(_stores_answer(state, params, per_page, page))
    if index != PRODUCTS_INDEX:
        return _error(f"Index {index} does not exist", 404)
    state.pages[page] += 1
    found = state.catalog.find(store) if store else None
    indices = state.catalog.product_indices(found, state.epoch) if found else []
    if "empty_menu" in fired:
        indices = []
    nb_hits = len(indices)
    chunk = indices[page * per_page : (page + 1) * per_page] if per_page else []
    if "duplicates" in fired and page > 0:  # the previous page again
        chunk = indices[(page - 1) * per_page : page * per_page]
    if "short_page" in fired and chunk:
        chunk = chunk[:-1]
    hits = [state.catalog.hit(found, i, state.epoch, base) for i in chunk] if found else []
    if "endless" in fired and found:
        hits = [
            {
                **hit(state.catalog.config.seed, found.id, 100_000 + page * per_page + k, 0, base),
                "product_id": 50_000_000 + page * per_page + k,
            }
            for k in range(per_page)
        ]
    if "lying_total" in fired:
        nb_hits = int(nb_hits * fired["lying_total"].factor)
    if "total_changed" in fired and page > 0:
        nb_hits += 7
    nb_pages = math.ceil(nb_hits / per_page) if per_page else 0
    if "endless" in fired:
        nb_hits, nb_pages = ENDLESS_HITS, math.ceil(ENDLESS_HITS / max(per_page, 1))
    if hits and "no_id" in fired:
        hits[0] = {k: v for k, v in hits[0].items() if k != "product_id"}
    if hits and ("oversized" in fired or "oversized_cut" in fired):
        hits[0] = {**hits[0], "description": "x" * OVERSIZED_BYTES}  # a field no one reads, 50 MB long
    answer = _json(
        {
            "hits": hits,
            "nbHits": nb_hits,
            "page": page,
            "nbPages": nb_pages,
            "hitsPerPage": per_page,
            "exhaustiveNbHits": True,
            "query": params.get("query", ""),
            "processingTimeMS": 1,
            "params": "",
        }
    )
    if "oversized_cut" in fired:
        assert isinstance(answer.body, bytes)
        answer.body = answer.body[: len(answer.body) // 2]
    return answer


def _stores_answer(state: JaneState, params: dict, per_page: int, page: int) -> dict:
    stores = state.catalog.stores
    around = str(params.get("aroundLatLng") or "")
    filters = str(params.get("filters") or "").replace(" ", "")
    if filters.startswith("id="):
        found = state.catalog.find(filters[3:])
        stores = [found] if found else []
    elif around:
        lat, _, lng = around.partition(",")
        radius = float(params.get("aroundRadius") or 50_000)
        pairs = [(_distance_m(float(lat), float(lng), s.lat, s.lng), s) for s in stores]
        stores = [s for d, s in sorted(pairs, key=lambda p: p[0]) if d <= radius]
    chunk = stores[page * per_page : (page + 1) * per_page] if per_page else []
    return {
        "hits": [state.catalog.store_document(s) for s in chunk],
        "nbHits": len(stores),
        "page": page,
        "nbPages": math.ceil(len(stores) / per_page) if per_page else 0,
        "hitsPerPage": per_page,
    }


# -- control (/_sandbox/jane/…) --------------------------------------------------------------------


async def control_state(request: web.Request) -> web.Response:
    state = request.app[JANE]
    return _json(
        {
            "epoch": state.epoch,
            "faults": state.faults.as_dicts(),
            "requests": dict(state.requests),
            "pages": {str(k): v for k, v in state.pages.items()},
        }
    )


async def control_epoch(request: web.Request) -> web.Response:
    request.app[JANE].epoch = int((await request.json())["epoch"])
    return _json({"ok": True})


async def control_faults(request: web.Request) -> web.Response:
    rules = request.app[JANE].faults.set_rules((await request.json()).get("rules", []))
    return _json({"rules": len(rules)})


async def control_reset(request: web.Request) -> web.Response:
    request.app[JANE].reset()
    return _json({"ok": True})


async def control_stores(request: web.Request) -> web.Response:
    state = request.app[JANE]
    wanted = request.query.get("state")
    return _json(
        [
            {**state.catalog.store_document(s), "menu_url": f"https://www.iheartjane.com/stores/{s.id}/{s.slug}/menu"}
            for s in state.catalog.stores
            if not wanted or s.state == wanted
        ]
    )


async def control_menu(request: web.Request) -> web.Response:
    state = request.app[JANE]
    store = state.catalog.find(request.match_info["store"])
    if store is None:
        return _error("no such store", 404)
    epoch = int(request.query.get("epoch", state.epoch))
    return _json({"product_ids": state.catalog.product_ids(store, epoch)})


def add_routes(app: web.Application, catalog: JaneCatalog, seed: int = 0, prefix: str = "/jane") -> None:
    app[JANE] = JaneState(catalog, seed)
    app.router.add_post(prefix + "/1/indexes/{index}/query", query)
    app.router.add_get("/_sandbox/jane/state", control_state)
    app.router.add_post("/_sandbox/jane/epoch", control_epoch)
    app.router.add_post("/_sandbox/jane/faults", control_faults)
    app.router.add_post("/_sandbox/jane/reset", control_reset)
    app.router.add_get("/_sandbox/jane/stores", control_stores)
    app.router.add_get("/_sandbox/jane/menu/{store}", control_menu)
