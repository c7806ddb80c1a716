"""The length limits of the text a product carries (docs/architecture.md, "Text limits").

PostgreSQL's text columns take a gigabyte, but a btree index entry at most ~2,700 bytes: a name
sent 10 kB long made its brand's or canonical product's key (unique indexes of
migrations/016_canonical_brands_products.sql) too long to index, and the database refused the row
on every crawl. So each text is bounded here, at normalization, to a length whose keys always fit
(in characters; a character is at most 4 bytes in UTF-8): the row is stored with the text cut
short, the product's loss is logged rate limited (storable/degraded.py) and counted
(`TRUNCATED`, the normalize pipeline's stat `cannaspider/text_truncated`).

Worst case of a canonical product's key, 'b<brand id>|<category>|<name key>|<size key>':
21 + 4×LABEL + 4×NAME_KEY + SIZE_KEY + 3 = 21 + 400 + 1,600 + 200 + 3 = 2,224 bytes; of a brand's,
'n:' + 4×NAME_KEY = 1,602 bytes ('d:' + an id: 2 + 4×ID = 402).
"""

from __future__ import annotations

from cannaspider.storable.degraded import Tally, degrade

NAME = 500  # a product's name as sent and cleaned (real ones: under 150)
NAME_KEY = 400  # a normalized name (a brand's, a product's): NFKC can lengthen a name
BRAND_NAME = 200
LABEL = 100  # category, subcategory, strain type, status, an option's name
ID = 100  # brandId, enterpriseProductId (a UUID: 36)
SIZE_KEY = 200  # ASCII: '1g,3.5g,7g'
DESCRIPTION = 5000  # a brand's description (not indexed: bounded so one brand cannot bloat every row)
TRUNCATED = Tally()  # texts cut to their limit by this process


def bounded(value: str, limit: int, what: str) -> str:
    """`value`, cut to `limit` characters when longer (recorded as degraded and counted)."""
    if len(value) <= limit:
        return value
    TRUNCATED.count += 1
    degrade(what, value)
    return value[:limit]
