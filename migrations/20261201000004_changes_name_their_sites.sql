-- A change to pages names the sites it changed, so a server drops only
-- those sites' summaries: one busy tenant no longer costs every other its
-- database-free answers. Names go in notifications of at most 7,900 bytes
-- (PostgreSQL takes 8,000); a statement that changes more sites than eight
-- of them hold sends '*', every site.

DROP TRIGGER sitemap_pages_notify ON sitemap_pages;
DROP TRIGGER sitemap_news_files_notify ON sitemap_news_files;
DROP FUNCTION sitemap_pages_notify();

CREATE FUNCTION sitemap_pages_announce() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    names text := '';
    sent integer := 0;
    site_name text;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('sitemapd_pages', '*');
        RETURN NULL;
    END IF;
    FOR site_name IN SELECT DISTINCT site FROM changed_rows ORDER BY site LOOP
        IF octet_length(names) + 1 + octet_length(site_name) > 7900 THEN
            sent := sent + 1;
            IF sent = 8 THEN
                PERFORM pg_notify('sitemapd_pages', '*');
                RETURN NULL;
            END IF;
            PERFORM pg_notify('sitemapd_pages', names);
            names := '';
        END IF;
        names := CASE WHEN names = '' THEN site_name ELSE names || ' ' || site_name END;
    END LOOP;
    IF names <> '' THEN
        PERFORM pg_notify('sitemapd_pages', names);
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_pages_announce() IS
$$Statement triggers on sitemap_pages and sitemap_news_files: notify sitemapd_pages with the names of the sites whose pages the statement changed (space-separated, at most 7,900 bytes a notification; '*' for every site past eight notifications, and on TRUNCATE), so servers drop those sites' summaries alone. PostgreSQL delivers at commit and folds duplicates within a transaction.$$;

CREATE TRIGGER sitemap_pages_inserted AFTER INSERT ON sitemap_pages
REFERENCING NEW TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();
CREATE TRIGGER sitemap_pages_updated AFTER UPDATE ON sitemap_pages
REFERENCING NEW TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();
CREATE TRIGGER sitemap_pages_deleted AFTER DELETE ON sitemap_pages
REFERENCING OLD TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();
CREATE TRIGGER sitemap_pages_truncated AFTER TRUNCATE ON sitemap_pages
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();

CREATE TRIGGER sitemap_news_files_inserted AFTER INSERT ON sitemap_news_files
REFERENCING NEW TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();
CREATE TRIGGER sitemap_news_files_updated AFTER UPDATE ON sitemap_news_files
REFERENCING NEW TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();
CREATE TRIGGER sitemap_news_files_deleted AFTER DELETE ON sitemap_news_files
REFERENCING OLD TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();
CREATE TRIGGER sitemap_news_files_truncated AFTER TRUNCATE ON sitemap_news_files
FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_announce();

-- The warm-up asks for the pages changed since its last look, newest
-- first, wherever they are: an index scan, not a pass over every site.
CREATE INDEX sitemap_pages_lastmod ON sitemap_pages (lastmod);
