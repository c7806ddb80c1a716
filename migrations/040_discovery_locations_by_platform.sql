-- What store discovery saw, for every platform (docs/platforms.md). Migration 001 named the table
-- for Dutchie, the seed's only platform, and keyed it by the platform id alone; Jane's stores are
-- found through the same pipeline (cannaspider/pipelines/dispensary_writer.py), so the table is
-- renamed and keyed by (platform, platform id), as `dispensaries` is: two platforms' ids can never
-- overwrite each other's row. The seed's name stays readable as a view of Dutchie's rows.
ALTER TABLE dutchie_discovery_locations RENAME TO discovery_locations;
ALTER SEQUENCE dutchie_discovery_locations_id_seq RENAME TO discovery_locations_id_seq;
ALTER TABLE discovery_locations ADD COLUMN platform text;
-- rows written before this migration: their dispensary's platform, else Dutchie's (the only one
-- that discovery searched before Jane)
UPDATE discovery_locations l
   SET platform = coalesce((SELECT d.platform FROM dispensaries d WHERE d.id = l.dispensary_id), 'dutchie');
ALTER TABLE discovery_locations ALTER COLUMN platform SET NOT NULL;
ALTER TABLE discovery_locations DROP CONSTRAINT dutchie_discovery_locations_platform_dispensary_id_key;
ALTER TABLE discovery_locations
    ADD CONSTRAINT discovery_locations_platform_id_key UNIQUE (platform, platform_dispensary_id);

CREATE VIEW dutchie_discovery_locations AS
    SELECT id, platform_dispensary_id, name, slug, city, state, menu_url, raw, dispensary_id, first_seen_at,
           last_seen_at
      FROM discovery_locations WHERE platform = 'dutchie';
