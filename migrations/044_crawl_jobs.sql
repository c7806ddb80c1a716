-- Crawl jobs (issue 33, "Jobs that say why"): one row per crawl process, written by `scrapy crawl`
-- at its exit (cannaspider/commands/crawl.py, cannaspider/db/crawl_jobs.py) with its exit code and
-- the reason it printed. Scrapyd's listjobs.json shows a job that exited 2 as finished like any
-- other, and keeps its stderr in the daemon's log only: this table is where the fleet's jobs, every
-- node's, say whether they did their work (GET /api/jobs, /dashboard/jobs).
CREATE TABLE crawl_jobs (
    id             bigserial   PRIMARY KEY,
    job            text,                  -- Scrapyd's job id (its `-a _job=…`); NULL: a crawl outside Scrapyd
    spider         text        NOT NULL,
    host           text        NOT NULL,  -- the node that ran it
    pid            integer     NOT NULL,
    arguments      jsonb       NOT NULL DEFAULT '{}',  -- its spider arguments but _job, passwords masked
    started_at     timestamptz,           -- NULL: the crawl never started (a bad argument)
    finished_at    timestamptz NOT NULL DEFAULT now(),
    exit_code      smallint    NOT NULL,  -- 0 done, 1 a bug, 2 arguments or database, 3 incomplete, 4 feed
    finish_reason  text,                  -- Scrapy's (finished, shutdown, closespider_…); NULL: never opened
    error          text,                  -- the `error:` line it printed, without its prefix
    log_file       text                   -- its LOG_FILE (Scrapyd's job log) on that node
);
-- the newest jobs, of the fleet or of one node (the jobs page), and one Scrapyd job by its id
CREATE INDEX crawl_jobs_finished_idx ON crawl_jobs (finished_at DESC);
CREATE INDEX crawl_jobs_host_idx ON crawl_jobs (host, finished_at DESC);
CREATE INDEX crawl_jobs_job_idx ON crawl_jobs (job) WHERE job IS NOT NULL;
