-- A proxy deactivated by its own failures is re-probed by `scrapy schedule` on a backoff, and
-- re-activated when a probe passes (docs/stealth.md, "Re-probing"). One disabled by an operator
-- (`scrapy proxies disable`) is not: deactivated_at is NULL for it.
ALTER TABLE proxies
    ADD COLUMN deactivated_at timestamptz,                 -- when its failures deactivated it
    ADD COLUMN next_probe_at  timestamptz,                 -- its next re-probe is due then
    ADD COLUMN probe_failures integer NOT NULL DEFAULT 0;  -- failed re-probes since it was deactivated

-- what the scheduler looks for on each tick
CREATE INDEX proxies_reprobe_due ON proxies (next_probe_at) WHERE NOT is_active AND deactivated_at IS NOT NULL;
