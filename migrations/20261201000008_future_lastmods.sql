-- A lastmod later than the fold that placed its row is served as the
-- moment of that fold. Bing distrusts sitemaps with future lastmods; the
-- write API and import refuse them, but plain SQL writes anything.
--
-- The fold records the clamp with the row's lastmod as written, so the
-- served value is the same on every later read: it moves only when the
-- row changes again. Rows whose lastmod is not in the future (almost all)
-- cost the fold one comparison and write nothing here.

CREATE TABLE sitemap_lastmod_clamps (
    id bigint PRIMARY KEY,
    site text NOT NULL,
    section text NOT NULL,
    written_lastmod timestamptz NOT NULL,
    served_lastmod timestamptz NOT NULL
);

CREATE INDEX sitemap_lastmod_clamps_site ON sitemap_lastmod_clamps (site, section);

COMMENT ON TABLE sitemap_lastmod_clamps IS
$$Rows whose lastmod was in the future when a fold placed them: served with served_lastmod (that fold's time) while their lastmod is still written_lastmod. Written by folds alone (sitemap_fold_clamp_lastmods); counted as lastmod-in-future in stats, the HTML view and the metrics.$$;

CREATE FUNCTION sitemap_fold_clamp_lastmods() RETURNS void
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
    -- Deleted rows' clamps, a bounded number per fold.
    DELETE FROM sitemap_lastmod_clamps
    WHERE id IN (SELECT c.id FROM sitemap_lastmod_clamps c
                 WHERE NOT EXISTS (SELECT 1 FROM sitemap_urls u WHERE u.id = c.id)
                 LIMIT 1000);
END $$;

COMMENT ON FUNCTION sitemap_fold_clamp_lastmods() IS
$$Step of a fold, before sitemap_fold_end: records the rows it read as changed whose lastmod is later than the fold's time (now()), to be served with that time, and forgets the clamps of rows changed since; drops up to 1,000 clamps of deleted rows.$$;

CREATE FUNCTION sitemap_served_lastmod(lastmod timestamptz, written_lastmod timestamptz,
                                       served_lastmod timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN written_lastmod = lastmod THEN served_lastmod
                WHEN lastmod > now() THEN now()
                ELSE lastmod END
$$;

COMMENT ON FUNCTION sitemap_served_lastmod(timestamptz, timestamptz, timestamptz) IS
$$The lastmod a row is served with, given its clamp (sitemap_lastmod_clamps, NULLs for none): the clamp's time while the row's lastmod is still the one clamped; else its lastmod, and now for a future one no fold has seen yet.$$;
