-- The team's own page per keyword and locale, compared with the SERP (docs/onpage.md, "Our page
-- against theirs"), and the on-page crawl's progress per keyword (docs/onpage.md, "Progress").

-- Set by the keywords file (`ownPage`) or PUT /api/keywords/{id}/own-page?locale=…. It is crawled
-- in the same Firecrawl batch as the locale's competitors: `crawl` holds its crawl fields, as a
-- competitor's in keywords.serp (crawlStatus, crawlHttpStatus, crawledAt, crawlError,
-- crawlWarning, onpage, corpusId; its corpus a row of onpage_corpora like theirs), and `gap` the
-- comparison computed with the locale's profile. Both are null until a crawl after the URL was set:
-- a new URL starts without them (the old page's results say nothing about the new one).
CREATE TABLE keyword_own_pages (
    keyword_id bigint      NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    locale     text        NOT NULL,
    url        text        NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now(),
    crawl      jsonb,
    gap        jsonb,
    PRIMARY KEY (keyword_id, locale),
    CONSTRAINT keyword_own_pages_crawl_is_object CHECK (crawl IS NULL OR jsonb_typeof(crawl) = 'object')
);

-- The last on-page job of each keyword, updated as its batches are polled, so that a client can
-- poll GET /api/keywords/{id}/progress every ~2 s. A queued task is read from worker_tasks.
CREATE TABLE onpage_progress (
    keyword_id    bigint      PRIMARY KEY REFERENCES keywords (id) ON DELETE CASCADE,
    state         text        NOT NULL CHECK (state IN ('running', 'done', 'failed')),
    pages_total   integer     NOT NULL DEFAULT 0,  -- URLs sent to Firecrawl, every locale (our pages included)
    pages_done    integer     NOT NULL DEFAULT 0,  -- of them, those Firecrawl is done with (a document or an error)
    locales_total integer     NOT NULL DEFAULT 0,
    locales_done  integer     NOT NULL DEFAULT 0,  -- classified and merged
    crawled       integer     NOT NULL DEFAULT 0,  -- totals of the merged locales (all of them once done)
    blocked       integer     NOT NULL DEFAULT 0,
    failed        integer     NOT NULL DEFAULT 0,
    error         text,
    started_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    finished_at   timestamptz
);
