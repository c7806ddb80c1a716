-- The snapshot history's cold tier (docs/history.md; issue #31, 3): a month of product_snapshots
-- older than HISTORY_ARCHIVE_AFTER_MONTHS is written to one Parquet file in HISTORY_ARCHIVE_STORE,
-- verified row for row, and its partition detached and dropped in the transaction that adds its
-- row here. Readers (the product history API, `scrapy export snapshots`) take a listed month from
-- its file; `scrapy history restore` loads it back and deletes the row.
CREATE TABLE history_archive (
    month        date        PRIMARY KEY,  -- the first day of the month (UTC), the partition's lower bound
    store        text        NOT NULL,     -- the folder the file was written to (HISTORY_ARCHIVE_STORE then)
    file         text        NOT NULL,     -- its name in that folder
    rows         bigint      NOT NULL,
    bytes        bigint      NOT NULL,
    pg_bytes     bigint      NOT NULL,     -- the partition's size with its indexes when it was dropped
    sha256       text        NOT NULL,     -- of the file, checked before a restore
    checksums    jsonb       NOT NULL,     -- per column, as verified (cannaspider/history/archive.py)
    archived_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT history_archive_first_day CHECK (month = date_trunc('month', month)::date)
);
