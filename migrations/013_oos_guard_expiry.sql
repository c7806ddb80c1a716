-- The OOS guard lets go (pipelines/crawl_completion.py, README "Crawl correctness"): a collapse seen
-- by OOS_AFTER_MISSES (3) consecutive complete crawls is real. While it lasts, each suspect crawl
-- counts no misses but keeps its evidence here:
--   * store_products.suspect_misses: suspect crawls in a row that did not see the product (reset
--     when a crawl sees it, and by every crawl that counts misses);
--   * crawl_runs.suspect_streak: which suspect crawl in a row of its store this one is (1, 2, 3);
--     the third confirms the collapse, counts the misses of all three and ends the streak.
-- Runs flagged before this migration have no streak (NULL): a streak starts afresh after them.
ALTER TABLE store_products ADD COLUMN suspect_misses smallint NOT NULL DEFAULT 0;
ALTER TABLE crawl_runs ADD COLUMN suspect_streak smallint;
