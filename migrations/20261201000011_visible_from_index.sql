-- no-transaction
-- Built without blocking writers: on a large table, a plain build would
-- hold their writes for the whole scan. A build cut short leaves an
-- invalid index; drop it and migrate again.
CREATE INDEX CONCURRENTLY sitemap_urls_visible_from ON sitemap_urls (visible_from) WHERE visible_from IS NOT NULL;
