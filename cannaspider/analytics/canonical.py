"""Canonical brands: the operator's aliases, names and the brand list (`scrapy brands`, docs/analytics.md,
"One brand, one product"). The product writer links each store product to its brand and canonical
product as it writes it (pipelines/product_writer.py); an alias merges brands already linked.

A brand row's canonical brand is coalesce(canonical_brand_id, id), one level deep: an alias points
every brand of the merged group at the target's root directly, so reading it never walks a chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from cannaspider.identity import brand_key_name


class BrandError(ValueError):
    """A name that is no brand, or an alias that cannot be made."""


@dataclass
class AliasResult:
    alias: str  # the normalized name aliased
    brand_id: int  # the canonical brand it now is
    brand_name: str | None
    brands_merged: int  # brand rows moved under it
    store_products: int  # store products relinked
    products_merged: int  # canonical products folded into an existing one


def resolve_brand(conn: psycopg.Connection, ref: str) -> tuple[int, str | None]:
    """A canonical brand by its id or by one of its names (any spelling that normalizes alike)."""
    if ref.strip().isdigit():
        row = conn.execute(
            "SELECT coalesce(b.canonical_brand_id, b.id) FROM brands b WHERE b.id = %s", (int(ref),)
        ).fetchone()
    else:
        key = brand_key_name(ref)
        row = conn.execute(
            "SELECT coalesce(canonical_brand_id, id) FROM brands WHERE normalized_name = %s ORDER BY id LIMIT 1",
            (key,),
        ).fetchone()
        if row is None:
            row = conn.execute("SELECT brand_id FROM brand_aliases WHERE alias = %s", (key,)).fetchone()
    if row is None:
        raise BrandError(f"no brand {ref!r} (see `scrapy brands list`)")
    name = conn.execute("SELECT name FROM brands WHERE id = %s", (row[0],)).fetchone()
    return row[0], name[0] if name else None


def alias(conn: psycopg.Connection, name: str, canonical: str) -> AliasResult:
    """Make every brand named `name` (normalized) the brand `canonical`, now and for brands seen
    later, and move their store products and canonical products over; one transaction."""
    key = brand_key_name(name)
    if key is None:
        raise BrandError(f"{name!r} has no letters or digits to match")
    with conn.transaction():
        target, target_name = resolve_brand(conn, canonical)
        old = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT coalesce(canonical_brand_id, id) FROM brands WHERE normalized_name = %s", (key,)
            )
            if r[0] != target
        ]
        conn.execute(
            "INSERT INTO brand_aliases (alias, brand_id) VALUES (%s, %s) "
            "ON CONFLICT (alias) DO UPDATE SET brand_id = EXCLUDED.brand_id, created_at = now()",
            (key, target),
        )
        merged = relinked = folded = 0
        if old:
            merged = conn.execute(
                "UPDATE brands SET canonical_brand_id = CASE WHEN id = %(t)s THEN NULL ELSE %(t)s END "
                "WHERE id = ANY(%(old)s) OR canonical_brand_id = ANY(%(old)s)",
                {"t": target, "old": old},
            ).rowcount
            conn.execute("UPDATE brand_aliases SET brand_id = %s WHERE brand_id = ANY(%s)", (target, old))
            relinked = conn.execute(
                "UPDATE store_products SET canonical_brand_id = %s WHERE canonical_brand_id = ANY(%s)", (target, old)
            ).rowcount
            folded = _move_products(conn, old, target)
    return AliasResult(key, target, target_name, merged, relinked, folded)


def _move_products(conn: psycopg.Connection, old: list[int], target: int) -> int:
    """Canonical products keyed by an old brand get the target's key; where the target already has
    that product, the store products move to it and the old one goes."""
    rows = conn.execute(
        "SELECT id, key, 'b' || %s || '|' || coalesce(category, '') || '|' || name_key || '|' || size_key "
        "FROM canonical_products WHERE canonical_brand_id = ANY(%s) ORDER BY id",
        (target, old),
    ).fetchall()
    folded = 0
    for product_id, key, new_key in rows:
        if not key.startswith("b"):  # an enterprise id names it: only its brand changes
            conn.execute("UPDATE canonical_products SET canonical_brand_id = %s WHERE id = %s", (target, product_id))
            continue
        existing = conn.execute("SELECT id FROM canonical_products WHERE key = %s", (new_key,)).fetchone()
        if existing is None:
            conn.execute(
                "UPDATE canonical_products SET key = %s, canonical_brand_id = %s WHERE id = %s",
                (new_key, target, product_id),
            )
        else:
            conn.execute(
                "UPDATE store_products SET canonical_product_id = %s WHERE canonical_product_id = %s",
                (existing[0], product_id),
            )
            conn.execute("DELETE FROM canonical_products WHERE id = %s", (product_id,))
            folded += 1
    return folded


@dataclass
class BrandRow:
    id: int
    name: str | None
    spellings: list[str]
    aliases: list[str]
    stores: int
    store_products: int
    products: int  # canonical products


def list_brands(conn: psycopg.Connection) -> list[BrandRow]:
    rows = conn.execute(
        """
        WITH canon AS (SELECT coalesce(canonical_brand_id, id) AS brand_id, name FROM brands)
        SELECT b.id, coalesce(b.display_name, b.name),
               (SELECT array_agg(DISTINCT c.name ORDER BY c.name) FROM canon c
                 WHERE c.brand_id = b.id AND c.name IS NOT NULL),
               (SELECT coalesce(array_agg(a.alias ORDER BY a.alias), '{}') FROM brand_aliases a
                 WHERE a.brand_id = b.id),
               (SELECT count(DISTINCT sp.dispensary_id) FROM store_products sp WHERE sp.canonical_brand_id = b.id),
               (SELECT count(*) FROM store_products sp WHERE sp.canonical_brand_id = b.id),
               (SELECT count(*) FROM canonical_products cp WHERE cp.canonical_brand_id = b.id)
          FROM brands b WHERE b.canonical_brand_id IS NULL ORDER BY coalesce(b.display_name, b.name), b.id
        """
    ).fetchall()
    return [BrandRow(r[0], r[1], list(r[2] or []), list(r[3]), r[4], r[5], r[6]) for r in rows]


@dataclass
class RenameResult:
    brand_id: int
    old_name: str | None  # the name shown before (its display name, else the first spelling seen)
    new_name: str
    alias_added: bool  # the new name's key now finds the brand (search, and brands seen later)


def rename(conn: psycopg.Connection, ref: str, new_name: str) -> RenameResult:
    """Show the canonical brand `ref` (a name in any spelling, or an id) as `new_name` everywhere
    (brands.display_name; the spellings the menus sent stay as they were). The new name's key
    becomes an alias of it, so a search by it finds the brand and a menu that sends it later joins
    it; a name that is another brand's already is refused (`scrapy brands alias` merges brands)."""
    name = " ".join(new_name.split())
    key = brand_key_name(name)
    if key is None:
        raise BrandError(f"{new_name!r} has no letters or digits to show")
    with conn.transaction():
        target, _ = resolve_brand(conn, ref)
        row = conn.execute("SELECT coalesce(display_name, name) FROM brands WHERE id = %s", (target,)).fetchone()
        owners = {
            r[0]
            for r in conn.execute(
                "SELECT coalesce(canonical_brand_id, id) FROM brands WHERE normalized_name = %(k)s "
                "UNION SELECT brand_id FROM brand_aliases WHERE alias = %(k)s",
                {"k": key},
            )
        }
        if owners - {target}:
            other = min(owners - {target})
            raise BrandError(
                f"{name!r} is the name of brand {other}: `scrapy brands alias {name!r} {target}` merges it into"
                " this one"
            )
        conn.execute("UPDATE brands SET display_name = %s WHERE id = %s", (name, target))
        added = not owners
        if added:
            conn.execute("INSERT INTO brand_aliases (alias, brand_id) VALUES (%s, %s)", (key, target))
    return RenameResult(target, row[0] if row else None, name, added)
