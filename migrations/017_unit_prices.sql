-- Unit prices per product (docs/analytics.md, "Unit prices"), computed by the normalizer
-- (cannaspider/dutchie/identity.py) on the option whose price is price_rec: per gram for a
-- weighed option, per 100 mg THC for an edible with a potency in mg, per unit otherwise.
ALTER TABLE store_products
    ADD COLUMN unit_price          numeric(16, 4),
    ADD COLUMN unit_price_special  numeric(16, 4),
    ADD COLUMN unit_price_basis    text,
    ADD CONSTRAINT store_products_unit_price_basis CHECK (unit_price_basis IN ('g', '100mg_thc', 'unit'));
