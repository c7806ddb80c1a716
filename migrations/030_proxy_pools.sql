-- Proxy classes (issue 31): each proxy belongs to a named pool. The crawl (GraphQL, store
-- websites) takes the 'crawl' pool; product images take IMAGES_PROXY_POOL's ('crawl' by default:
-- the store's own session), so an operator can send image CDN traffic through a cheaper pool
-- (`scrapy proxies add --pool images URL`) without it ever carrying an API request.
ALTER TABLE proxies ADD COLUMN pool text NOT NULL DEFAULT 'crawl';
