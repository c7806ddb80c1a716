-- When an event was written (docs/analytics.md, "Alerts"): the alert matcher reads the events
-- written since its previous pass by this column, not by occurred_at (the start of the crawl
-- that saw them). A crawl's events are written by its close, which may come hours after its
-- start: matched by occurred_at with a fixed look-back, a crawl that closed more than the
-- look-back after it started had its events never matched. now() is the close transaction's
-- start, seconds before it commits, so the matcher's look-back before its previous pass (see
-- cannaspider/alerts/match.py) covers every transaction still open then.
--
-- Added without a value for the rows there are, then given its default: the existing rows keep
-- NULL (no rewrite of the table, and no replay of history to the subscriptions: a NULL never
-- matches); every row written from now on gets its transaction's time.
ALTER TABLE product_events ADD COLUMN recorded_at timestamptz;
ALTER TABLE product_events ALTER COLUMN recorded_at SET DEFAULT now();
-- the rows come in recorded_at order: a BRIN index stays tiny and finds a pass's rows
CREATE INDEX product_events_recorded_idx ON product_events USING brin (recorded_at);
