-- A proxy's recent attempts, the window its deactivation reads (docs/stealth.md, "Failures"):
-- one letter per attempt, oldest first, S a success and F a failure event, at most
-- STEALTH_PROXY_ATTEMPT_WINDOW of them. failure_count and success_count become lifetime counters:
-- a success no longer erases the failures, and the window says whether they are recent.
ALTER TABLE proxies
    ADD COLUMN recent_attempts text NOT NULL DEFAULT ''
        CONSTRAINT proxies_recent_attempts_letters CHECK (recent_attempts ~ '^[SF]*$');

-- until now failure_count counted failure events in a row (a success reset it): those are the
-- proxy's latest attempts, so a proxy one failure from deactivation stays one failure from it
UPDATE proxies SET recent_attempts = repeat('F', least(greatest(COALESCE(failure_count, 0), 0), 64));
