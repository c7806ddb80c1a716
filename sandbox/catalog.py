"""A deterministic Dutchie catalog: stores per state and their menus, evolving by epoch.

Everything derives from (seed, state, store index, product index, epoch) through hashes, so two
sandboxes with the same seed serve byte-identical payloads. Menus evolve when the epoch advances:
some products vanish for one, two or three epochs and come back, prices and specials change, new
products appear. The store objects are the real ConsumerDispensaries fixture with our values.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from cannaspider.platforms.geography import haversine_miles, us_places
from sandbox import month


def dispensary_template() -> dict:
    """The real ConsumerDispensaries fixture, our model for store objects (read from the package,
    which also works inside a zipped egg)."""
    return json.loads(resources.files("sandbox").joinpath("dispensary_template.json").read_text())


CATEGORIES = {
    "Flower": ["", "Premium", "Smalls", "Shake"],
    "Pre-Rolls": ["Singles", "Packs", "Infused"],
    "Vaporizers": ["Cartridges", "Disposables", "Pods"],
    "Concentrate": ["Live Resin", "Shatter", "Badder", "Rosin"],
    "Edible": ["Gummies", "Chocolates", "Drinks", "Baked Goods"],
    "Tincture": ["Oils", "Sprays"],
    "Topicals": ["Balms", "Lotions"],
    "Accessories": ["Papers", "Batteries"],
}
STRAIN_TYPES = [
    "Indica",
    "Sativa",
    "Hybrid",
    "Hybrid",
    "High CBD",
    "1 to 1",
    "Indica-Hybrid",
    "Sativa-Hybrid",
    "N/A",
    None,
]
BRANDS = [
    "Bud Bros",
    "Desert Bloom",
    "Grow Sciences",
    "Item 9 Labs",
    "Timeless",
    "Abundant Organics",
    "Wana",
    "Stiiizy",
    "Select",
    "Kiva",
    "Camino",
    "Dr. Zodiak's",
    "Ogeez",
    "Tru Infusion",
    "Mohave Cannabis Co.",
    "Cannabist",
    "Sip Elixirs",
    "High Tide",
    "Canamo",
    "Halo",
]
ADJECTIVES = [
    "Blue",
    "Purple",
    "Golden",
    "Lemon",
    "Sour",
    "Cosmic",
    "Wedding",
    "Garlic",
    "Cherry",
    "Mango",
    "Ice",
    "Gelato",
    "Mint",
    "Velvet",
    "Desert",
    "Jack",
    "Runtz",
    "Zkittlez",
]
NOUNS = [
    "Dream",
    "Haze",
    "Kush",
    "Cookies",
    "Cake",
    "Diesel",
    "Breath",
    "Punch",
    "Glue",
    "Sherbet",
    "Octane",
    "Pie",
    "Mints",
    "Berry",
    "OG",
    "Skunk",
]
FLOWER_OPTIONS = [
    ["1g", "1/8oz", "1/4oz", "1/2oz", "1oz"],
    ["1/8oz"],
    ["3.5g", "7g", "14g"],
    ["1gC", "1/8oz"],
    [".5g", "1g"],
    ["N/A"],
]
CHAINS = [
    "Harvest",
    "Curaleaf",
    "Trulieve",
    "Sol Flower",
    "Nature's Medicines",
    "The Mint",
    "Zen Leaf",
    "Ponder",
    "Nirvana Center",
    "JARS",
    "Story",
    "Kaycha",
    "Giving Tree",
    "Earth's Healing",
    "Sticky Saguaro",
    "Green Pharms",
    "Yilo",
    "Ocotillo",
    "Tumbleweed",
]
MENU_URL_STYLES = ("dispensary", "embedded-menu", "stores", "website", "website-iframe")
# The same product sold by several stores (docs/analytics.md, "One brand, one product"): half of a
# menu's products come from a catalog-wide library of LIBRARY_SIZE products (their name, brand,
# category, sizes and potency are the library's; price, stock, specials and name noise are the
# store's); a third of the library carries an enterpriseProductId. Brands are sometimes spelled
# otherwise by a store, and sometimes sent as a name without brandId; two spellings below are
# beyond what normalization resolves (an operator's alias does).
LIBRARY_SIZE = 400
ALIAS_SPELLINGS = {"Item 9 Labs": "Item Nine Labs", "Mohave Cannabis Co.": "Mohave"}
# rawOptions: the option's weight in grams (docs/dutchie.md, "Products"); a store that prices by tier
# sends tier names as Options ("Tier 1") and the weights only there
RAW_GRAMS = {"1/8oz": "3.5g", "1/4oz": "7g", "1/2oz": "14g", "1oz": "28g", "1gC": "1g"}


@dataclass(frozen=True)
class ProductTruth:
    """What a sandbox product really is: its brand and the product it is across stores."""

    brand: str
    product: str  # 'library:<k>' for a library product, else '<store id>:<index>'


def h(*parts: object) -> int:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def object_id(*parts: object) -> str:
    """A 24-hex MongoDB ObjectId lookalike."""
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=12).hexdigest()


def uuid_like(*parts: object) -> str:
    x = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=16).hexdigest()
    return f"{x[:8]}-{x[8:12]}-4{x[13:16]}-a{x[17:20]}-{x[20:32]}"


def slugify(text: str) -> str:
    out = "".join(c.lower() if c.isalnum() else "-" for c in text)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")


@lru_cache(maxsize=1)
def _us_cities() -> list[dict]:
    return sorted(us_places(), key=lambda c: -c["population"])


@dataclass(frozen=True)
class Store:
    id: str
    index: int
    state: str
    name: str
    cname: str
    city: str
    zipcode: str
    lat: float
    lng: float
    timezone: str
    menu_style: str
    product_count: int
    rec: bool
    medical: bool


@dataclass(frozen=True)
class CatalogConfig:
    seed: int = 42
    states: tuple[str, ...] = ("AZ", "MI", "NV")
    stores_per_state: int = 6
    min_products: int = 120
    max_products: int = 260
    jane_stores_per_state: int = 4  # the Jane sandbox's stores (sandbox/jane_api.py), in these stores' cities


class Catalog:
    def __init__(self, config: CatalogConfig = CatalogConfig()):
        self.config = config
        self.stores: list[Store] = []
        for state in config.states:
            self.stores.extend(self._make_stores(state))
        self.by_key: dict[str, Store] = {}
        for store in self.stores:
            self.by_key[store.id] = store
            self.by_key[store.cname] = store
        self._template = dispensary_template()

    # -- stores --------------------------------------------------------------------------
    def _make_stores(self, state: str) -> list[Store]:
        cfg = self.config
        cities = [c for c in _us_cities() if c["admin1code"] == state] or _us_cities()[:5]
        stores = []
        for i in range(cfg.stores_per_state):
            city = cities[h(cfg.seed, state, i, "city") % min(len(cities), 8)]
            chain = CHAINS[h(cfg.seed, state, i, "chain") % len(CHAINS)]
            name = f"{chain} - {city['name']}" + (f" #{i}" if i >= len(CHAINS) else "")
            jitter = (h(cfg.seed, state, i, "lat") % 2000 - 1000) / 20000.0
            span = cfg.max_products - cfg.min_products
            stores.append(
                Store(
                    id=object_id(cfg.seed, state, i),
                    index=i,
                    state=state,
                    name=name,
                    cname=f"{slugify(name)}-{state.lower()}-{i}",
                    city=city["name"],
                    zipcode=f"{85000 + h(cfg.seed, state, i, 'zip') % 9999:05d}",
                    lat=round(city["latitude"] + jitter, 6),
                    lng=round(city["longitude"] - jitter, 6),
                    timezone=city["timezone"],
                    menu_style=MENU_URL_STYLES[i % len(MENU_URL_STYLES)],
                    product_count=cfg.min_products + (h(cfg.seed, state, i, "n") % (span + 1) if span else 0),
                    rec=i % 4 != 3,
                    medical=i % 3 != 1,
                )
            )
        return stores

    def find(self, key: str) -> Store | None:
        return self.by_key.get(key)

    def menu_url(self, store: Store, base: str) -> str:
        style = store.menu_style
        if style.startswith("website"):
            return f"{base}/sites/{store.cname}/"
        return f"{base}/{style}/{store.cname}"

    def dispensary_object(self, store: Store, base: str, distance: float | None = None) -> dict:
        obj = copy.deepcopy(self._template)
        menu_url = self.menu_url(store, base)
        own_site = store.menu_style.startswith("website")
        obj.update(
            {
                "id": store.id,
                "name": store.name,
                "cName": store.cname,
                "timezone": store.timezone,
                "distance": distance,
                "chain": slugify(store.name.split(" - ")[0]),
                "phone": f"(602) 555-{h(store.id, 'ph') % 10000:04d}",
                "address": f"{100 + store.index * 7} W Main St, {store.city}, {store.state} {store.zipcode}, USA",
                "embeddedMenuUrl": menu_url if own_site else None,
                "menuUrl": menu_url,
                "embedBackUrl": menu_url if own_site else None,
                "recDispensary": store.rec,
                "medicalDispensary": store.medical,
                "customDomainSettings": None,
                "listImage": f"{base}/images/stores/{store.id}.png",
                "logoImage": f"{base}/images/stores/{store.id}.png",
            }
        )
        obj["location"] = {
            "ln1": f"{100 + store.index * 7} W Main St",
            "ln2": "",
            "city": store.city,
            "state": store.state,
            "country": "United States",
            "zipcode": store.zipcode,
            "geometry": {"coordinates": [store.lng, store.lat], "__typename": "Geometry"},
            "__typename": "Dispensaries_location",
        }
        return obj

    def search(self, lat: float, lng: float, distance: float, state: str | None) -> list[tuple[Store, float]]:
        found = []
        for store in self.stores:
            if state and store.state != state:
                continue
            d = haversine_miles(lat, lng, store.lat, store.lng)
            if d <= distance:
                found.append((store, round(d, 3)))
        return sorted(found, key=lambda pair: pair[1])

    # -- menus ---------------------------------------------------------------------------
    def present(self, store: Store, index: int, epoch: int, key: str | None = None) -> bool:
        """Whether product `index` is on the menu at `epoch` (the evolution rules; the month's on
        its days: month.py). `key`: the store's key in the catalog (a Jane store's: jane_key)."""
        day = month.day_of(epoch)
        if day is not None:
            store_key = key or store.id
            brand = product_truth(self.config.seed, store_key, index).brand
            collapsing = key is None and store.index == month.COLLAPSING_STORE
            return month.present(h, self.config.seed, store_key, index, day, brand, collapsing)
        k = index % 37
        if k == 5:  # gone at epochs 1-3, back at 4: the three-miss OOS story
            return not (1 <= epoch <= 3)
        if k == 11:  # gone at epoch 2 only
            return epoch != 2
        if k == 17:  # gone at epochs 1-2
            return not (1 <= epoch <= 2)
        if index % 41 == 7:  # new product, appears at epoch 2
            return epoch >= 2
        return True

    def product_indices(self, store: Store, epoch: int) -> list[int]:
        return [i for i in range(store.product_count) if self.present(store, i, epoch)]

    def product_id(self, store: Store, index: int) -> str:
        return object_id(self.config.seed, store.id, "product", index)

    def product(self, store: Store, index: int, epoch: int, base: str) -> dict:
        return _product(self.config.seed, store.id, index, epoch, base)

    def truth(self, store: Store, index: int) -> ProductTruth:
        return product_truth(self.config.seed, store.id, index)


def _library_index(seed: int, store_id: str, index: int) -> int | None:
    """The library product a store's product `index` is, or None for a product of its own."""
    if h(seed, store_id, index, "shared") % 2:
        return None
    return h(seed, store_id, index, "lib") % LIBRARY_SIZE


def product_truth(seed: int, store_id: str, index: int) -> ProductTruth:
    k = _library_index(seed, store_id, index)
    if k is None:
        return ProductTruth(BRANDS[h(seed, store_id, index, "brand") % len(BRANDS)], f"{store_id}:{index}")
    return ProductTruth(BRANDS[h(seed, "library", k, "brand") % len(BRANDS)], f"library:{k}")


def _brand_as_sent(brand: str, r) -> tuple[str, bool]:
    """The brand's name as this store sends it, and whether it sends its brandId."""
    with_id = r("nobrandid") % 12 != 0
    spelling = r("spell") % 10
    if not with_id and brand in ALIAS_SPELLINGS and spelling < 5:
        return ALIAS_SPELLINGS[brand], False
    if spelling == 0:
        return brand.upper(), with_id
    if spelling == 1:
        return "".join(c for c in brand if c.isalnum() or c == " "), with_id
    return brand, with_id


def _brand_description(seed: int, brand: str) -> str | None:
    """brand.description: the brand's own text, the same in every store; null for a third of brands."""
    if h(seed, "brand", brand, "description") % 3 == 0:
        return None
    return f"{brand} makes small-batch cannabis products, lab tested and packed by hand."


@lru_cache(maxsize=200_000)
def _product(seed: int, store_id: str, index: int, epoch: int, base: str) -> dict:
    """One raw FilteredProducts product, with the quirks of the real payload (docs/dutchie.md, "Products")."""
    r = lambda *k: h(seed, store_id, index, *k)  # noqa: E731 - a local shorthand
    pid = object_id(seed, store_id, "product", index)
    k = _library_index(seed, store_id, index)
    # what the product is: the library's draws for a library product, the store's own otherwise
    ident = r if k is None else (lambda *key: h(seed, "library", k, *key))
    category = list(CATEGORIES)[ident("cat") % len(CATEGORIES)]
    subcategory = CATEGORIES[category][ident("sub") % len(CATEGORIES[category])]
    brand = BRANDS[ident("brand") % len(BRANDS)]
    brand_sent, with_brand_id = _brand_as_sent(brand, r)
    enterprise_id = object_id(seed, "enterprise", k) if k is not None and ident("ent") % 3 == 0 else None
    name = f"{ADJECTIVES[ident('a') % len(ADJECTIVES)]} {NOUNS[ident('n') % len(NOUNS)]}"
    if category != "Flower":
        name = f"{name} {subcategory.rstrip('s')}".strip()
    if r("html") % 29 == 0:
        name = f"{name} <b>NEW</b> &amp; Improved"
    raw_options = None
    if category in ("Flower", "Pre-Rolls", "Concentrate"):
        options = list(FLOWER_OPTIONS[ident("opt") % len(FLOWER_OPTIONS)])
        if h(seed, store_id, "tiers") % 4 == 0 and "N/A" not in options:  # a store whose menu uses tiers
            raw_options = [RAW_GRAMS.get(o, o) for o in options]
            options = [f"Tier {j + 1}" for j in range(len(options))]
    elif category == "Edible":
        options = [["100mg"], ["10pk"], ["N/A"]][ident("opt") % 3]
    else:
        options = [["1g"], [".5g", "1g"], ["each"]][ident("opt") % 3]
    base_price = 10 + r("price") % 60
    day = month.day_of(epoch)
    if day is None:  # the tests' epochs
        drift = 1 + 0.05 * ((h(seed, store_id, index, "drift", epoch) % 3) - 1) if r("vol") % 4 == 0 else 1
        discount = 20 if h(seed, store_id, index, "special", epoch) % 7 == 0 else None
    else:  # a day of the demo's month
        drift = month.price_factor(h, seed, store_id, index, day, category, volatile=r("vol") % 4 == 0)
        discount = month.special_discount(h, seed, store_id, index, day)
    on_special = discount is not None
    off = 1 - (discount or 0) / 100
    rec_prices = [round(base_price * (1 + 1.6 * j) * drift, 2) for j in range(len(options))]
    med_prices = [round(p * 0.9, 2) for p in rec_prices] if r("med") % 3 else []
    rec_special = [round(p * off, 2) for p in rec_prices] if on_special else []
    med_special = [round(p * off, 2) for p in med_prices] if on_special and med_prices else []

    unit = ["PERCENTAGE", "PERCENTAGE", "MILLIGRAMS", "MILLIGRAMS_PER_GRAM"][ident("unit") % 4]
    if category in ("Edible", "Tincture"):
        unit = "MILLIGRAMS"
    thc = (
        None
        if r("thcnull") % 9 == 0
        else (
            [round(14 + ident("thc") % 200 / 10, 1)] if unit == "PERCENTAGE" else [float(5 * (1 + ident("thc") % 20))]
        )
    )
    if thc and ident("thcrange") % 5 == 0:
        thc = [thc[0], round(thc[0] + 2, 1)]
    stock_children = None
    if r("pos") % 3 == 0:
        stock_children = [
            {
                "option": opt,
                "quantity": r("q", opt, epoch) % 40,
                "quantityAvailable": r("qa", opt, epoch) % 30,
                "kioskQuantityAvailable": r("qk", opt) % 10,
                "__typename": "POSChild",
            }
            for opt in options
        ]
    specials = None
    if on_special:
        specials = {
            "saleSpecials": [
                {
                    "specialName": f"{discount}% off {category}",
                    "specialType": "sale",
                    "discount": discount,
                    "percentDiscount": True,
                }
            ],
            "bogoSpecials": [
                {
                    "specialName": "Buy 2 get 1",
                    "specialType": "bogo",
                    "itemsForAPrice": {"value": "45.00"},
                    "bogoRewards": [{"totalQuantity": {"quantity": 3}}],
                }
            ]
            if r("bogo") % 2
            else [],
        }
    effects_key = ["effects", "Effects"][r("eff") % 2]
    created_ms = 1_650_000_000_000 + r("created") % 60_000_000_000
    image = f"{base}/images/products/{pid}.png" if r("img") % 10 else None
    return {
        "_id": pid,
        "id": pid,
        "Name": name,
        "cName": slugify(name) + f"-{index}",
        "brandName": brand_sent,
        "brand": {
            "id": uuid_like(brand),
            "name": brand_sent,
            "description": _brand_description(seed, brand),
            "imageUrl": f"{base}/images/brands/{slugify(brand)}.png",
        }
        if with_brand_id
        else None,
        "brandId": uuid_like(brand) if with_brand_id else None,
        "enterpriseProductId": enterprise_id,
        "type": category,
        "subcategory": subcategory.lower().replace(" ", "-") if subcategory else None,
        "strainType": STRAIN_TYPES[ident("strain") % len(STRAIN_TYPES)],
        "Status": "Active",
        "Image": image,
        "images": [{"url": image, "description": None}] if image else [],
        "Options": options,
        "rawOptions": raw_options or [o.replace("1/8oz", "3.5g") for o in options],
        "Prices": rec_prices,
        "recPrices": rec_prices,
        "medicalPrices": med_prices,
        "recSpecialPrices": rec_special,
        "medicalSpecialPrices": med_special,
        "special": True if on_special else None,
        "specialData": specials,
        "THC": None,
        "CBD": None,
        "THCContent": {"unit": unit, "range": thc},
        "CBDContent": {"unit": unit, "range": [0.1] if r("cbd") % 2 else None},
        "cannabinoidsV2": [{"value": thc[0], "unit": unit, "cannabinoid": {"name": "THC"}}] if thc else [],
        "POSMetaData": {"children": stock_children} if stock_children else None,
        effects_key: {"Relaxed": r("e1") % 5, "Happy": r("e2") % 5} if r("effnull") % 3 else None,
        "createdAt": str(created_ms),
        "updatedAt": f"2026-{1 + r('um') % 11:02d}-{1 + r('ud') % 28:02d}T12:00:00.000Z",
        "__typename": "Products",
    }
