-- A deleted row's lastmod clamp goes when the fold takes its removal, not
-- by a search for clamps without a row: that search read every clamp on
-- every fold, a cost that grew with the clamps kept and found nothing
-- almost always.

CREATE OR REPLACE FUNCTION sitemap_fold_clamp_lastmods() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sitemap_lastmod_clamps c
    USING sitemap_fold_rows f
    WHERE c.id = f.id AND f.change_xid IS NOT NULL;
    INSERT INTO sitemap_lastmod_clamps (id, site, section, written_lastmod, served_lastmod)
    SELECT u.id, u.site, u.section, u.lastmod, now()
    FROM sitemap_fold_rows f JOIN sitemap_urls u ON u.id = f.id
    WHERE f.change_xid IS NOT NULL AND u.lastmod > now()
    ON CONFLICT (id) DO UPDATE
        SET site = excluded.site, section = excluded.section,
            written_lastmod = excluded.written_lastmod, served_lastmod = excluded.served_lastmod;
END $$;
COMMENT ON FUNCTION sitemap_fold_clamp_lastmods() IS
$$Step of a fold, before sitemap_fold_end: records the rows it read as changed whose lastmod is later than the fold's time (now()), to be served with that time, and forgets the clamps of rows changed since.$$;

CREATE FUNCTION sitemap_fold_forget_clamps() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sitemap_lastmod_clamps) THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM sitemap_removals WHERE id IS NULL) THEN
        DELETE FROM sitemap_lastmod_clamps;
    ELSE
        DELETE FROM sitemap_lastmod_clamps c USING sitemap_removals r WHERE c.id = r.id;
    END IF;
END $$;
COMMENT ON FUNCTION sitemap_fold_forget_clamps() IS
$$Step of a fold, before sitemap_fold_begin takes the removals: drops the lastmod clamps of the rows deleted (or truncated) since the last fold.$$;

DELETE FROM sitemap_lastmod_clamps c
WHERE NOT EXISTS (SELECT 1 FROM sitemap_urls u WHERE u.id = c.id);
