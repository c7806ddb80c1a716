-- Alerts on events (docs/analytics.md, "Alerts"): operators' subscriptions (`scrapy alerts add`)
-- and an outbox of deliveries. Matching a subscription against new product events (and the
-- market roll's availability changes) inserts one delivery per subscription and event, once
-- (unique key); a sender posts them, signed, and retries a failed one with a doubling wait, so a
-- webhook that is down or answers 500 loses nothing. Crawls never wait for any of it: the close
-- writes its events and is done, the alerts process reads them afterwards.
CREATE TABLE alert_subscriptions (
    id              bigserial   PRIMARY KEY,
    webhook_url     text        NOT NULL,  -- may carry a token: never logged, listed as scheme://host only
    types           text[]      NOT NULL,  -- event types, and/or 'availability_changed'
    state           text,                  -- only stores of this state (NULL: any)
    dispensary_id   bigint,                -- only this store
    brand           text,                  -- as the operator typed it
    brand_key       text,                  -- its normalized name: any spelling of the canonical brand matches
    min_drop_pct    numeric,               -- price_changed: only drops of at least this percent
    min_change      numeric,               -- availability_changed: |4-week change| of at least this (0..1)
    enabled         boolean     NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alert_subscriptions_types CHECK (
        types <@ ARRAY['listed', 'price_changed', 'special_started', 'special_ended', 'out_of_stock',
                       'back_in_stock', 'availability_changed']::text[] AND cardinality(types) > 0)
);

CREATE TABLE alert_deliveries (
    id               bigserial   PRIMARY KEY,
    subscription_id  bigint      NOT NULL REFERENCES alert_subscriptions (id) ON DELETE CASCADE,
    key              text        NOT NULL,  -- 'e:<event id>' or 'a:<state>:<day>:<brand>': what it reports
    payload          jsonb       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    last_status      integer,               -- the receiver's last HTTP status (NULL: no answer)
    last_error       text,                  -- why the last attempt failed (no URL, no secret)
    CONSTRAINT alert_deliveries_once UNIQUE (subscription_id, key)
);
CREATE INDEX alert_deliveries_due_idx ON alert_deliveries (next_attempt_at) WHERE delivered_at IS NULL;

-- where the last matching pass started: the next one reads the events from a look-back before it
CREATE TABLE alert_match_state (
    only_row     boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    matched_at   timestamptz NOT NULL
);
