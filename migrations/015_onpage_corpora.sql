-- The semantic corpus of SERP competitor pages and each keyword's semantic profile per locale
-- (docs/onpage.md, "Corpus" and "Semantic profile"). The text lives here, not in keywords.serp,
-- so the keyword's row stays small: a competitor of keywords.serp[locale].competitors[] that
-- answered `ok` carries `corpusId`, the id of its row below. One row per keyword, locale and
-- URL: a new crawl of the page replaces it (its id stays), and rows no competitor points to any
-- more are deleted by the crawl that dropped them.
CREATE TABLE onpage_corpora (
    id              bigserial   PRIMARY KEY,
    keyword_id      bigint      NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    locale          text        NOT NULL,
    url             text        NOT NULL,
    crawled_at      timestamptz NOT NULL,
    lang            text,
    title           text,
    main_text       text        NOT NULL,
    headings        jsonb       NOT NULL DEFAULT '[]',
    alt_texts       jsonb       NOT NULL DEFAULT '[]',
    anchors         jsonb       NOT NULL DEFAULT '[]',
    json_ld         jsonb       NOT NULL DEFAULT '[]',
    json_ld_invalid integer     NOT NULL DEFAULT 0,
    words           integer     NOT NULL DEFAULT 0,
    html_chars      integer     NOT NULL DEFAULT 0,
    truncated       boolean     NOT NULL DEFAULT false,
    CONSTRAINT onpage_corpora_page_key UNIQUE (keyword_id, locale, url)
);

-- Computed at the end of each crawl of the locale from its competitors' corpora.
CREATE TABLE keyword_profiles (
    keyword_id  bigint      NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    locale      text        NOT NULL,
    computed_at timestamptz NOT NULL DEFAULT now(),
    profile     jsonb       NOT NULL,
    PRIMARY KEY (keyword_id, locale)
);
