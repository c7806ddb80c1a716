"""Raw FilteredProducts product → canonical StoreProduct.

Every quirk of the real payload is handled here (docs/dutchie.md): price arrays aligned with
Options and [] when empty, irregular option strings, {unit, range} potency with range possibly
null, POSMetaData usually null, special true-or-null, effects key casing, createdAt as epoch-ms
string. A product we cannot identify or name raises NormalizationError; anything else degrades to
None.

What leaves this module is storable as is, by the rules of cannaspider/storable.py (the writers
send each batch as one statement: one value PostgreSQL refuses would lose them all); each product
that lost a value is logged, rate limited (storable.py). The Dutchie fields are read in
options.py and fields.py. This runs once per product of every crawl (millions a day), so the
common shapes take the shortest path: type checks inline, few calls, labels (category, strain
type) cached; only unusual values take the slower, careful one.
"""

from __future__ import annotations

from functools import lru_cache

from cannaspider.identity import brand_key_name, option_grams, product_name_key, size_key, sizes_key, unit_prices
from cannaspider.items import ProductOption, RawProduct, StoreProduct
from cannaspider.platforms.dutchie.fields import (
    brand_description,
    brand_field,
    brand_logo,
    label,
    parse_cannabinoids,
    parse_effects,
    parse_images,
    parse_specials,
    potency,
    strain_type,
)
from cannaspider.platforms.dutchie.ids import product_id
from cannaspider.platforms.dutchie.options import (
    lowest,
    option_name_size,
    parse_option_size,
    parse_options,
    prices,
    raw_option_size,
)
from cannaspider.platforms.interface import NormalizationError
from cannaspider.storable import BRAND_NAME, ID, NAME, Losses, bounded, clean, repair, storable, timestamp

# The caches of strings made storable (a string repaired or cut in one is reported once per
# process): what a fresh process starts without (tests clear them).
__all__ = ["STORABLE_CACHES", "NormalizationError", "normalize"]

STORABLE_CACHES = (label, strain_type, brand_description, option_name_size, raw_option_size)


@lru_cache(maxsize=4096)
def _size_key_of(option_strings: tuple[str, ...], raw_strings: tuple[str, ...]) -> str:
    """identity.size_key() of the options sent as these strings, with these rawOptions (a few
    hundred distinct lists); an option without a size takes its rawOptions entry's (options.py)."""
    sizes = set()
    n_raw = len(raw_strings)
    for i, text in enumerate(option_strings):
        value, unit = parse_option_size(text)
        if value is None and i < n_raw:
            value, unit = parse_option_size(raw_strings[i])
        if value is not None and unit:
            sizes.add((unit, value))
    return sizes_key(sizes) if sizes else ""


def options_size_key(options_raw: object, raw_options: object, options: list[ProductOption]) -> str:
    if type(options_raw) is list:
        try:
            return _size_key_of(tuple(options_raw), tuple(raw_options) if type(raw_options) is list else ())
        except TypeError:  # an option that is a list or an object (not hashable), or a number
            pass
    return size_key(options)


def normalize(item: RawProduct, losses: Losses) -> StoreProduct:
    """The item as the shared StoreProduct; what it lost goes to `losses` (reported once it is done)."""
    raw = item.raw
    if not isinstance(raw, dict):
        raise NormalizationError(f"product is a {type(raw).__name__}, not an object")
    if losses.lost:  # left by a product whose normalization raised
        losses.lost.clear()
    get = raw.get
    pid = product_id(raw)
    if pid is None:  # the spider counts it the same way (ids.py): the crawl is incomplete
        raise NormalizationError("product has no usable _id/id (missing, blank, or with a NUL or lone surrogate)")
    name_raw = get("Name")
    if type(name_raw) is not str:
        raise NormalizationError(f"product {pid} has no usable Name ({name_raw!r})")
    if not name_raw.isascii() or "\x00" in name_raw:
        name_raw = repair(losses, name_raw, "Name")
    name = clean(name_raw)
    if not name:
        raise NormalizationError(f"product {pid} has no usable Name ({name_raw!r})")
    if len(name_raw) > NAME:  # (storable.py: its keys must fit an index)
        name_raw, name = bounded(losses, name_raw, NAME, "Name"), name[:NAME]

    rec = prices(losses, get("recPrices")) or prices(losses, get("Prices"))
    med = prices(losses, get("medicalPrices"))
    rec_sp = prices(losses, get("recSpecialPrices"))
    med_sp = prices(losses, get("medicalSpecialPrices"))
    options_raw = get("Options")
    options, quantity_available = (
        parse_options(losses, raw, options_raw, rec, med, rec_sp, med_sp) if type(options_raw) is list else ([], None)
    )
    special_data = get("specialData")
    specials = parse_specials(losses, special_data) if special_data else []
    rec_special = lowest(rec_sp)
    brand = get("brand")
    brand_name = get("brandName")
    if type(brand_name) is not str or not brand_name.isascii() or "\x00" in brand_name or len(brand_name) > BRAND_NAME:
        brand_name = brand_field(losses, brand_name, brand, "name", "brandName", BRAND_NAME)
    brand_id = get("brandId")
    if type(brand_id) is not str or not brand_id or not brand_id.isascii() or "\x00" in brand_id or len(brand_id) > ID:
        brand_id = brand_field(losses, brand_id, brand, "id", "brandId", ID)
    category, subcategory, strain = get("type"), get("subcategory"), get("strainType")
    cannabinoids = get("cannabinoidsV2")
    images = parse_images(losses, raw)
    category = label(losses, category) if type(category) is str else None
    price_rec = lowest(rec)
    thc = potency(losses, get("THCContent"), get("THC"), "THC")
    brand_norm = brand_key_name(brand_name)
    enterprise_id = get("enterpriseProductId")
    if type(enterprise_id) is not str or not enterprise_id.strip():
        enterprise_id = None
    else:
        enterprise_id = bounded(
            losses, storable(losses, enterprise_id.strip(), "enterpriseProductId"), ID, "enterpriseProductId"
        )
    unit_price, unit_price_special, unit_basis = unit_prices(options, price_rec, category, thc, losses)
    status = get("Status")
    description = brand.get("description") if type(brand) is dict else None
    product = StoreProduct(
        # positional, in field order (keywords cost a dict and a parse per product)
        item.dispensary_id,  # dispensary_id
        item.crawl_run_id,  # crawl_run_id
        pid,  # provider_product_id
        name_raw,  # name_raw
        name,  # name
        brand_name,  # brand_name_raw
        brand_id,  # brand_id
        category,  # category
        label(losses, subcategory) if type(subcategory) is str else None,  # subcategory
        strain_type(losses, strain) if type(strain) is str else None,  # strain_type
        price_rec,  # price_rec
        lowest(med),  # price_med
        rec_special,  # price_rec_special
        lowest(med_sp),  # price_med_special
        bool(get("special")) or bool(specials) or rec_special is not None,  # is_on_special
        options,  # options
        thc,  # thc
        potency(losses, get("CBDContent"), get("CBD"), "CBD"),  # cbd
        parse_cannabinoids(losses, cannabinoids) if cannabinoids and type(cannabinoids) is list else [],  # cannabinoids
        specials,  # specials
        parse_effects(losses, raw),  # effects
        images[0] if images else None,  # image_url
        images,  # images
        quantity_available,  # quantity_available
        timestamp(losses, get("createdAt"), "createdAt"),  # provider_created_at
        timestamp(losses, get("updatedAt"), "updatedAt"),  # provider_updated_at
        "dutchie",  # provider
        brand_logo(losses, brand),  # brand_logo_url
        enterprise_id,  # enterprise_product_id
        brand_norm,  # brand_name_key
        product_name_key(name, brand_norm, option_grams(options)),  # name_key
        options_size_key(options_raw, get("rawOptions"), options),  # size_key
        unit_price,  # unit_price
        unit_price_special,  # unit_price_special
        unit_basis,  # unit_price_basis
        label(losses, status) if type(status) is str else None,  # status
        brand_description(losses, description)
        if type(description) is str and description
        else None,  # brand_description
    )
    losses.report(pid)
    return product
