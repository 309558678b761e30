-- Sites move between cells (`sitemapd sites move`).
--
-- A move copies a site's rows from the cell that serves it (the source) to
-- another (the target) while writers go on writing to the source, then
-- refuses the site's writes on the source for the final catch-up, the
-- target's folds and the check that both serve the same entries. From
-- then on the target takes the site's writes and the source refuses them,
-- so no acknowledged write is left behind on the source. The target
-- refuses them until the copy is verified, so nothing written there is
-- overwritten by the copy.
--
-- The check runs once per statement, on the rows it wrote (transition
-- tables): a statement costs one index probe of an almost always empty
-- table, and the rows' capture, which is within the noise of a 1M-row
-- INSERT (13.0 to 14.8 s with the trigger, 13.1 to 13.9 s without).

CREATE TABLE sitemap_site_moves (
    site text PRIMARY KEY,
    direction text NOT NULL CONSTRAINT sitemap_site_moves_direction_value CHECK (direction IN ('out', 'in')),
    other_cell text NOT NULL,
    refuses_writes boolean NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    verified_at timestamptz NULL
);

COMMENT ON TABLE sitemap_site_moves IS
$$Sites moving to or from another cell (`sitemapd sites move`), one row each. direction 'out': the site leaves this cell; its writes are refused from the final catch-up on (refuses_writes), and for good once the move is verified (verified_at), so they go to the new cell. direction 'in': the site arrives; its writes are refused until the copy is verified, when the row is deleted. other_cell names the other database (its URL without a password). `sitemapd sites move NAME --abort` deletes both rows.$$;

CREATE FUNCTION sitemap_urls_refuse_moving_sites() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    refused sitemap_site_moves;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sitemap_site_moves WHERE refuses_writes)
       OR current_setting('sitemapd.move', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT m.* INTO refused FROM sitemap_site_moves m
        WHERE m.refuses_writes AND m.site IN (SELECT site FROM new_rows) LIMIT 1;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT m.* INTO refused FROM sitemap_site_moves m
        WHERE m.refuses_writes
          AND m.site IN (SELECT site FROM new_rows UNION SELECT site FROM old_rows) LIMIT 1;
    ELSE
        SELECT m.* INTO refused FROM sitemap_site_moves m
        WHERE m.refuses_writes AND m.site IN (SELECT site FROM old_rows) LIMIT 1;
    END IF;
    IF refused.site IS NULL THEN
        RETURN NULL;
    END IF;
    IF refused.direction = 'in' THEN
        RAISE EXCEPTION 'site % is arriving from another cell (%): its writes are refused until the copy is verified', refused.site, refused.other_cell
            USING ERRCODE = 'SD001', HINT = 'retry in a few seconds, through the proxy';
    ELSIF refused.verified_at IS NULL THEN
        RAISE EXCEPTION 'site % is moving to another cell (%): its writes are refused during the switch', refused.site, refused.other_cell
            USING ERRCODE = 'SD001', HINT = 'retry in a few seconds, through the proxy';
    ELSE
        RAISE EXCEPTION 'site % has moved to another cell (%): write to that cell', refused.site, refused.other_cell
            USING ERRCODE = 'SD001', HINT = 'the proxy sends the site to its new cell';
    END IF;
END $$;

COMMENT ON FUNCTION sitemap_urls_refuse_moving_sites() IS
$$After each INSERT, UPDATE or DELETE of sitemap_urls, once per statement: refuses it (SQLSTATE SD001, naming the site and the other cell) when it wrote a row of a site whose writes sitemap_site_moves refuses. The move's own statements pass (setting sitemapd.move = on).$$;

CREATE TRIGGER sitemap_urls_inserted_for_moves AFTER INSERT ON sitemap_urls
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_urls_refuse_moving_sites();
CREATE TRIGGER sitemap_urls_updated_for_moves AFTER UPDATE ON sitemap_urls
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_urls_refuse_moving_sites();
CREATE TRIGGER sitemap_urls_deleted_for_moves AFTER DELETE ON sitemap_urls
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_urls_refuse_moving_sites();
