-- Liveness of an open crawl run, so that the run of a process that died (kill -9, a lost
-- machine) is found and closed as 'failed' by the next crawl within minutes, not hours
-- (cannaspider/db/crawl_store.py):
--   heartbeat_at  the crawl process sets it to now() every CRAWL_RUN_HEARTBEAT_S while the run is open
--   host, pid     where that process runs: on the same host, a pid that is gone means a dead run
ALTER TABLE crawl_runs
    ADD COLUMN heartbeat_at timestamptz,
    ADD COLUMN host         text,
    ADD COLUMN pid          integer;

-- runs opened before this migration have no heartbeat: their start is the last sign of life
UPDATE crawl_runs SET heartbeat_at = started_at WHERE status = 'running';
ALTER TABLE crawl_runs ALTER COLUMN heartbeat_at SET DEFAULT now();

CREATE INDEX crawl_runs_running_idx ON crawl_runs (heartbeat_at) WHERE status = 'running';
