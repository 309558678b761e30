-- The rows a fold reads, looked up one by one for a lastmod in the future.
-- Planned as it stood, the lookup scanned the whole of sitemap_urls for
-- lastmods past now() and hashed the batch against them: about a second a
-- fold at 10M rows, whatever the batch, which held a 10M-row backlog to
-- some 50,000 rows/s. A batch's rows by their primary key cost a probe each
-- (0.15 s for 150,000 rows at 10M), and forgetting clamps costs nothing
-- while there are none.
CREATE OR REPLACE FUNCTION sitemap_fold_clamp_lastmods() RETURNS void
    LANGUAGE plpgsql
    SET jit TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM sitemap_lastmod_clamps) THEN
        DELETE FROM sitemap_lastmod_clamps c
        USING sitemap_fold_rows f
        WHERE c.id = f.id AND f.change_xid IS NOT NULL;
    END IF;
    INSERT INTO sitemap_lastmod_clamps (id, site, section, written_lastmod, served_lastmod)
    SELECT u.id, u.site, u.section, u.lastmod, now()
    FROM sitemap_fold_rows f JOIN sitemap_urls u ON u.id = f.id
    WHERE f.change_xid IS NOT NULL AND u.lastmod > now()
    ON CONFLICT (id) DO UPDATE
        SET site = excluded.site, section = excluded.section,
            written_lastmod = excluded.written_lastmod, served_lastmod = excluded.served_lastmod;
END $$;
