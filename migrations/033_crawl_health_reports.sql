-- Crawl-health reports in the database (issue 33, "Health shared by the fleet"): every node's crawls
-- write their report here (cannaspider/monitors/health_notify.py), so the dashboard's health page,
-- /api/health and /metrics of any web service show the whole fleet; the JSON file each crawl also
-- writes under HEALTH_REPORT_DIR stays, a local copy.
CREATE TABLE crawl_health_reports (
    id             bigserial   PRIMARY KEY,
    spider         text        NOT NULL,
    host           text        NOT NULL,  -- the node that ran the crawl
    pid            integer     NOT NULL,
    ok             boolean     NOT NULL,
    finish_reason  text,                  -- NULL: a periodic check of a crawl still running
    started_at     timestamptz,
    finished_at    timestamptz NOT NULL,
    blocks         integer     NOT NULL DEFAULT 0,  -- the sum of report->'blocks_per_proxy'
    report         jsonb       NOT NULL   -- the report as the JSON file holds it (redacted)
);
-- the newest report of each spider (the health page), the blocks of a window (/metrics)
CREATE INDEX crawl_health_reports_spider_idx ON crawl_health_reports (spider, finished_at DESC);
CREATE INDEX crawl_health_reports_time_idx ON crawl_health_reports USING brin (finished_at);
-- /metrics counts the crawls of the last day by their start
CREATE INDEX crawl_runs_started_idx ON crawl_runs (started_at);
