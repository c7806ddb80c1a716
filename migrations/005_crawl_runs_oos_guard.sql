-- The out-of-stock guard (pipelines/crawl_completion.py, README "Crawl correctness"): a complete
-- crawl that saw fewer than OOS_GUARD_MIN_SHARE of the store's in-stock products counts no misses.
-- Such a run keeps status 'complete' (every page arrived) and is flagged here, with the figures
-- that tripped the guard, so an operator can tell an emptied menu from a quiet one.
ALTER TABLE crawl_runs
    ADD COLUMN suspect        boolean NOT NULL DEFAULT false,
    ADD COLUMN suspect_reason text;
