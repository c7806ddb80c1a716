-- Every image fetched once per source (issue 31, docs/images.md "One download per source").
--
-- image_sources: one row per image source, keyed by the SHA-256 of its normalized URL
-- (image_source_hash: platform-neutral, the scheme and host lower-cased, a default port and the
-- fragment dropped), with the key of the one object stored for it. The row is also the fetch's
-- claim across processes and nodes: INSERT ... ON CONFLICT gives it to one claimer; a failed
-- fetch sets 'failed' (claimable again at once), a claimer that died leaves 'fetching' whose
-- lease (IMAGES_SOURCE_LEASE_S) expires, so no claim is ever stuck.
--
-- image_paths: every per-store path /img serves (store_products.local_image_path, a brand logo's
-- path) → the source whose object it shows. The paths, the API and the pages are unchanged; /img
-- resolves a path through this mapping (cannaspider/web/image_sources.py).
CREATE FUNCTION image_source_hash(url text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT encode(sha256(convert_to(
        CASE WHEN m IS NULL THEN u
             ELSE lower(m[1]) || '://'
                  || regexp_replace(lower(m[2]),
                                    CASE lower(m[1]) WHEN 'http' THEN ':80$' WHEN 'https' THEN ':443$' ELSE '$.^' END,
                                    '')
                  || CASE WHEN m[3] = '' OR left(m[3], 1) = '?' THEN '/' || m[3] ELSE m[3] END
        END, 'UTF8')), 'hex')
      FROM (SELECT btrim(url) AS u) s,
           LATERAL (SELECT regexp_match(s.u, '^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^#]*)') AS m) x
$$;

CREATE TABLE image_sources (
    source_hash text PRIMARY KEY,                 -- image_source_hash(url)
    url         text NOT NULL,                    -- the URL first seen (any spelling of it hashes the same)
    object_key  text NOT NULL,                    -- where its webp is, relative to IMAGES_STORE
    status      text NOT NULL CHECK (status IN ('fetching', 'stored', 'failed')),
    claim       text,                             -- the current claimer's token: only it may settle the row
    claimed_by  text,                             -- host:pid, for operators
    claimed_at  timestamptz,
    stored_at   timestamptz,
    attempts    integer NOT NULL DEFAULT 0,
    last_error  text
);

CREATE TABLE image_paths (
    path        text PRIMARY KEY,
    source_hash text NOT NULL REFERENCES image_sources (source_hash) ON DELETE CASCADE
);

-- migrate existing stores: every stored image becomes (or joins) a source, its file as it is
-- (nothing is downloaded, copied or moved). A row whose local_image_path was written for an older
-- URL (the file name's hash is not the current URL's) is left as it is: its file is served by its
-- own path, and the pipeline fetches the new URL (a changed image).
INSERT INTO image_sources (source_hash, url, object_key, status, stored_at, attempts)
SELECT DISTINCT ON (source_hash) source_hash, image_url, local_image_path, 'stored', now(), 0
  FROM (SELECT image_source_hash(image_url) AS source_hash, image_url, local_image_path, id
          FROM store_products
         WHERE local_image_path IS NOT NULL AND image_url IS NOT NULL
           AND local_image_path LIKE '%/image-'
               || left(encode(sha256(convert_to(image_url, 'UTF8')), 'hex'), 8) || '.webp') found
 ORDER BY source_hash, id
ON CONFLICT (source_hash) DO NOTHING;

INSERT INTO image_paths (path, source_hash)
SELECT DISTINCT ON (local_image_path) local_image_path, image_source_hash(image_url)
  FROM store_products
 WHERE local_image_path IS NOT NULL AND image_url IS NOT NULL
   AND local_image_path LIKE '%/image-' || left(encode(sha256(convert_to(image_url, 'UTF8')), 'hex'), 8) || '.webp'
 ORDER BY local_image_path, id
ON CONFLICT (path) DO NOTHING;
