"""The GraphQL operations we call: names, full query text, and default persisted-query hashes.

Dutchie serves persisted queries (GET with extensions.persistedQuery.sha256Hash). Hashes rotate;
when the server answers PersistedQueryNotFound we send the full query text below instead.
"""

from __future__ import annotations

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
      _id id Name cName brandName brand { id name description imageUrl } brandId
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

DEFAULT_PERSISTED_HASHES: dict[str, str] = {
    FILTERED_PRODUCTS: "c75ea6b6d5a7bd30e52aed3b09da754c712817244e43a794c127da602ea06fce",
    CONSUMER_DISPENSARIES: "0a5bfa6ca1d64ae47bcccb7c8077c87147cbc4e6982c17ceec97a2a4948b311b",
    DISPENSARY_SEARCH: "8b7b8c5b3e1f4a2d9e0c6f1a7d3b5e9c2f4a6d8b0c1e3f5a7b9d2c4e6f8a0b1c",
}


def products_variables(platform_dispensary_id: str, page: int, per_page: int) -> dict:
    """The seed's FilteredProducts variables (Status "All": null returns nothing)."""
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


def consumer_dispensaries_variables(slug_or_id: str) -> dict:
    return {"dispensaryFilter": {"cNameOrID": slug_or_id}}


def dispensary_search_variables(lat: float, lng: float, distance_mi: float, state: str) -> dict:
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
