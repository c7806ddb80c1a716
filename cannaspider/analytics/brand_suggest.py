"""Likely duplicate brands, for an operator to merge (`scrapy brands suggest`, docs/analytics.md,
"Near-duplicate brands"). The matching rules group the spellings normalization can resolve;
what is left ("Mohave Cannabis Company" / "MOHAVE CANABIS CO.", "Item 9 Labs" / "Item Nine Labs")
ranks as two brands until someone aliases them. Three signals, each a reason printed with the pair:

- **names alike**: a fuzzy score (rapidfuzz's token_sort_ratio, 0-100, word order ignored) between
  the brand keys of any two spellings of the two brands, scored all against all in one C call;
- **one Dutchie brandId**: a name sent with brandId X by one store names another brand elsewhere
  (Dutchie's own catalog says they are one; its row took the first name it was sent with);
- **the same stores**: stores that list both (a menu whose catalog holds two records of one brand:
  the issue's "ABUNDANT ORGANICS" and "Abundant Organics" facets), as a Jaccard share.

A pair is suggested when its names score at least `min_score` or a brandId joins it; its rank is
the name score, plus 15 for a brandId, plus up to 10 for the share of stores. Nothing is merged:
each suggestion ends with the `scrapy brands alias` that would merge the smaller into the larger.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import psycopg
from rapidfuzz import fuzz, process

from cannaspider.identity import brand_key_name

BRAND_ID_BONUS = 15.0
STORES_BONUS = 10.0
CHUNK = 1000

# every canonical brand's spellings as keys (its rows' keys and its aliases), name shown and stores
BRANDS = """
SELECT b.id, coalesce(b.display_name, b.name),
       array_cat(coalesce((SELECT array_agg(DISTINCT o.normalized_name) FROM brands o
                            WHERE coalesce(o.canonical_brand_id, o.id) = b.id AND o.normalized_name IS NOT NULL),
                          '{}'),
                 coalesce((SELECT array_agg(a.alias) FROM brand_aliases a WHERE a.brand_id = b.id), '{}'))
  FROM brands b WHERE b.canonical_brand_id IS NULL
"""
STORES = "SELECT canonical_brand_id, array_agg(DISTINCT dispensary_id) FROM store_products GROUP BY 1"
# the names each Dutchie brandId was sent with, and the canonical brand its row is
SENT_WITH_ID = """
SELECT DISTINCT b.provider_brand_id, coalesce(b.canonical_brand_id, b.id), sp.brand_name_raw
  FROM store_products sp JOIN brands b ON b.id = sp.brand_ref_id
 WHERE b.key LIKE 'd:%%' AND sp.brand_name_raw IS NOT NULL
"""


@dataclass
class Brand:
    id: int
    name: str | None
    keys: list[str]
    stores: frozenset[int]


@dataclass
class Suggestion:
    keep: Brand  # the one with more stores: the alias target
    merge: Brand
    name_score: float
    keys: tuple[str, str]  # the two keys that scored it
    brand_ids: list[str] = field(default_factory=list)  # Dutchie brandIds sent with both
    shared_stores: int = 0
    jaccard: float = 0.0

    @property
    def score(self) -> float:
        return self.name_score + (BRAND_ID_BONUS if self.brand_ids else 0.0) + STORES_BONUS * self.jaccard

    def reasons(self) -> list[str]:
        out = [f"names {self.name_score:.0f}/100 alike: {self.keys[0]!r} / {self.keys[1]!r}"]
        out += [f"Dutchie brandId {i} is sent with both names" for i in self.brand_ids]
        if self.shared_stores:
            out.append(
                f"listed together by {self.shared_stores} store(s) (of {len(self.keep.stores)} and "
                f"{len(self.merge.stores)}; Jaccard {self.jaccard:.2f})"
            )
        else:
            out.append(f"no store lists both (of {len(self.keep.stores)} and {len(self.merge.stores)})")
        return out

    def command(self) -> str:
        name = (self.merge.name or self.keys[1]).replace('"', '\\"')
        return f'scrapy brands alias "{name}" {self.keep.id}'


def load(conn: psycopg.Connection) -> dict[int, Brand]:
    stores = {r[0]: frozenset(r[1]) for r in conn.execute(STORES) if r[0] is not None}
    return {
        r[0]: Brand(r[0], r[1], sorted(set(r[2] or ())), stores.get(r[0], frozenset())) for r in conn.execute(BRANDS)
    }


def _brand_id_pairs(conn: psycopg.Connection, brands: dict[int, Brand]) -> dict[tuple[int, int], set[str]]:
    """Canonical brand pairs a Dutchie brandId joins: a name sent with it is another brand's key."""
    by_key: dict[str, set[int]] = defaultdict(set)
    for brand in brands.values():
        for key in brand.keys:
            by_key[key].add(brand.id)
    pairs: dict[tuple[int, int], set[str]] = defaultdict(set)
    for provider_id, owner, raw in conn.execute(SENT_WITH_ID):
        for other in by_key.get(brand_key_name(raw) or "", ()):
            if other != owner:
                pairs[(min(owner, other), max(owner, other))].add(provider_id)
    return pairs


def suggest(conn: psycopg.Connection, *, min_score: float = 85.0, limit: int = 50) -> list[Suggestion]:
    """The likely duplicate pairs of canonical brands, most likely first."""
    brands = load(conn)
    keys = [(key, brand.id) for brand in brands.values() for key in brand.keys]
    best: dict[tuple[int, int], tuple[float, str, str]] = {}
    texts = [k for k, _ in keys]
    # rows of CHUNK keys against all: a byte per score, CHUNK × len(keys) at a time (20,000 keys: 20 MB)
    for start in range(0, len(texts), CHUNK):
        scores = process.cdist(
            texts[start : start + CHUNK],
            texts,
            scorer=fuzz.token_sort_ratio,
            score_cutoff=min_score,
            dtype="uint8",
            workers=-1,
        )
        for row, j in zip(*scores.nonzero(), strict=True):
            i = start + int(row)
            first, second = keys[i][1], keys[int(j)][1]
            if first >= second:  # each pair once, never a brand with itself
                continue
            score = float(scores[row, j])
            if score > best.get((first, second), (-1.0, "", ""))[0]:
                best[(first, second)] = (score, keys[i][0], keys[int(j)][0])
    by_id = _brand_id_pairs(conn, brands)
    out = []
    for pair in set(best) | set(by_id):
        a, b = (brands[pair[0]], brands[pair[1]])
        score, key_a, key_b = best.get(pair) or _name_score(a, b)
        keep, merge = (a, b) if (len(a.stores), -a.id) >= (len(b.stores), -b.id) else (b, a)
        if keep is b:
            key_a, key_b = key_b, key_a
        shared = len(a.stores & b.stores)
        union = len(a.stores | b.stores)
        out.append(
            Suggestion(
                keep,
                merge,
                score,
                (key_a, key_b),
                sorted(by_id.get(pair, ())),
                shared,
                shared / union if union else 0.0,
            )
        )
    out.sort(key=lambda s: (-s.score, s.keep.id, s.merge.id))
    return out[:limit]


def _name_score(a: Brand, b: Brand) -> tuple[float, str, str]:
    """The best score between two brands' keys (for a pair a brandId joins below the cutoff)."""
    return max(((fuzz.token_sort_ratio(x, y), x, y) for x in a.keys for y in b.keys), default=(0.0, "", ""))
