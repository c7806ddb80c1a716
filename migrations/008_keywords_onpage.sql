-- SERP competitors crawled through Firecrawl (docs/onpage.md). A keyword is one row whatever
-- its case or spacing (the import upserts by it), and serp stays an object keyed by locale.
CREATE UNIQUE INDEX keywords_keyword_key ON keywords (lower(keyword));
ALTER TABLE keywords ADD CONSTRAINT keywords_serp_is_object CHECK (jsonb_typeof(serp) = 'object');
