"""The GraphQL operations we call: names, full query text, and default persisted-query hashes.

Dutchie serves persisted queries (GET with extensions.persistedQuery.sha256Hash). Hashes rotate;
when the server answers PersistedQueryNotFound we send the full query text below instead
(docs/dutchie.md, "Persisted queries").
"""

from __future__ import annotations

from typing import Any

FILTERED_PRODUCTS = "FilteredProducts"
CONSUMER_DISPENSARIES = "ConsumerDispensaries"
DISPENSARY_SEARCH = "DispensarySearch"

_DISPENSARY_FIELDS = """
      id name cName timezone phone address status chain
      location { ln1 ln2 city state country zipcode geometry { coordinates } }
      embeddedMenuUrl menuUrl recDispensary medicalDispensary distance
      listImage logoImage
"""

_PRODUCT_FIELDS = """
      _id id Name cName brandName brand { id name description imageUrl } brandId enterpriseProductId
      type subcategory strainType Status Image images { url description }
      Options rawOptions Prices recPrices medicalPrices recSpecialPrices medicalSpecialPrices
      special specialData { saleSpecials { specialName specialType discount percentDiscount }
                            bogoSpecials { specialName specialType itemsForAPrice { value }
                                           bogoRewards { totalQuantity { quantity } } } }
      THC CBD THCContent { unit range } CBDContent { unit range }
      cannabinoidsV2 { value unit cannabinoid { name } }
      POSMetaData { children { option quantity quantityAvailable kioskQuantityAvailable } }
      effects createdAt updatedAt
"""

QUERIES: dict[str, str] = {
    FILTERED_PRODUCTS: (
        "query FilteredProducts($includeEnterpriseSpecials: Boolean, $productsFilter: productsFilterInput!,"
        " $page: Int, $perPage: Int) {\n"
        "  filteredProducts(filter: $productsFilter, page: $page, perPage: $perPage,"
        " includeEnterpriseSpecials: $includeEnterpriseSpecials) {\n"
        f"    products {{{_PRODUCT_FIELDS}    }}\n"
        "    queryInfo { totalCount totalPages }\n"
        "  }\n}"
    ),
    CONSUMER_DISPENSARIES: (
        "query ConsumerDispensaries($dispensaryFilter: dispensaryFilterInput!) {\n"
        f"  filteredDispensaries(filter: $dispensaryFilter) {{{_DISPENSARY_FIELDS}  }}\n}}"
    ),
    DISPENSARY_SEARCH: (
        "query DispensarySearch($dispensaryFilter: dispensaryFilterInput!) {\n"
        f"  filteredDispensaries(filter: $dispensaryFilter) {{{_DISPENSARY_FIELDS}  }}\n}}"
    ),
}

# Persisted-query hashes seen in public scrapers' code, newest first, with the month each was
# last seen there (docs/dutchie.md, "Persisted queries"). None is verified by us: Dutchie rotates
# them every few months and never publishes them, so the first of each list is only our best
# guess, and the full-query fallback is what keeps a crawl working when it is stale. Never invent
# one: a made-up hash is stale from day one, and looks like a real one to whoever updates this list.
KNOWN_PERSISTED_HASHES: dict[str, tuple[tuple[str, str], ...]] = {
    FILTERED_PRODUCTS: (
        ("3307e40a53bfb0b59896e267e3a46c2e99da18d3b376567d23267b6483bc3a76", "2026-09, said verified"),
        ("98b4aaef79a84ae804b64d550f98dd64d7ba0aa6d836eb6b5d4b2ae815c95e32", "2026-04"),
        ("c3dda0418c4b423ed26a38d011b50a2b8c9a1f8bde74b45f93420d60d2c50ae1", "2026-03"),
        ("ee29c060826dc41c527e470e9ae502c9b2c169720faa0a9f5d25e1b9a530a4a0", "2025-11"),
    ),
    CONSUMER_DISPENSARIES: (
        ("3ab100feea4c18eccc7a6051c9ad0b852ec5dc7c7837e1dc399e7508022173d8", "2026-09"),
        ("0d3ff8648848a737bbbeff9d090854ce2b78a7c4330d4982dab5b32ba2009448", "2026-03"),
    ),
    DISPENSARY_SEARCH: (
        # the only one public code shows, from 2021: probably rotated since, expect the fallback
        ("705e9d913c37b5f85ef56e7977d2a8b3c21bccd42e3431a91ed93def1b8adcf7", "2021"),
    ),
}

# The newest of each: what settings.DUTCHIE_PERSISTED_HASHES starts from.
DEFAULT_PERSISTED_HASHES: dict[str, str] = {op: seen[0][0] for op, seen in KNOWN_PERSISTED_HASHES.items()}


def products_variables(platform_dispensary_id: str, page: int, per_page: int) -> dict[str, Any]:
    """FilteredProducts variables as known to work (docs/dutchie.md, "Products"): Status "All",
    since null returns nothing; pricingType "rec" still brings medical prices."""
    return {
        "includeEnterpriseSpecials": False,
        "productsFilter": {
            "dispensaryId": platform_dispensary_id,
            "pricingType": "rec",
            "Status": "All",
            "types": [],
            "useCache": False,
            "isDefaultSort": True,
            "sortBy": "popularSortIdx",
            "sortDirection": 1,
            "bypassOnlineThresholds": True,
            "isKioskMenu": False,
            "removeProductsBelowOptionThresholds": False,
        },
        "page": page,
        "perPage": per_page,
    }


def consumer_dispensaries_variables(slug_or_id: str) -> dict[str, Any]:
    return {"dispensaryFilter": {"cNameOrID": slug_or_id}}


def dispensary_search_variables(lat: float, lng: float, distance_mi: float, state: str) -> dict[str, Any]:
    return {
        "dispensaryFilter": {
            "type": "Dispensary",
            "activeOnly": True,
            "nearLat": lat,
            "nearLng": lng,
            "distance": distance_mi,
            "destinationTaxState": state,
        }
    }
