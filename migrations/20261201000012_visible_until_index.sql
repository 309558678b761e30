-- no-transaction
-- As sitemap_urls_visible_from: built without blocking writers.
CREATE INDEX CONCURRENTLY sitemap_urls_visible_until ON sitemap_urls (visible_until) WHERE visible_until IS NOT NULL;
