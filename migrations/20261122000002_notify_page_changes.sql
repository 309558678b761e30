-- Servers keep the page summaries in memory between writes; every statement
-- that changes them says so on the `sitemapd_pages` channel. PostgreSQL
-- delivers a notification at commit (none for a rolled-back transaction)
-- and folds duplicates within a transaction, so a bulk write costs one.
CREATE FUNCTION sitemap_pages_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sitemapd_pages', '');
    RETURN NULL;
END $$;

CREATE TRIGGER sitemap_pages_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sitemap_pages
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_notify();
