-- Visibility windows: a row is listed only while
-- visible_from <= now() < visible_until (either bound may be left open). A
-- job posting leaves the sitemaps when it expires, and a scheduled article
-- enters them at its hour, with no write at that moment: each fold moves
-- the rows whose window opened or closed since the last one
-- (sitemap_fold_windows), and folds run a few times a second.
--
-- A row outside its window is left out like any other, with the reason
-- not-yet-visible or no-longer-visible; it stays in sitemap_urls.

ALTER TABLE sitemap_urls
    ADD COLUMN visible_from timestamptz,
    ADD COLUMN visible_until timestamptz,
    -- New columns, NULL in every row: nothing to check in the rows there.
    ADD CONSTRAINT sitemap_urls_window_order
        CHECK (visible_from < visible_until) NOT VALID;

COMMENT ON COLUMN sitemap_urls.visible_from IS
$$When the row enters the sitemaps (null: it is listed from its first fold). Folds move it within a fold's interval of the moment; IndexNow is sent its URL then.$$;
COMMENT ON COLUMN sitemap_urls.visible_until IS
$$When the row leaves the sitemaps (null: never); later than visible_from. The row stays in the table, left out as no-longer-visible.$$;

ALTER TABLE sitemap_fold_state ADD COLUMN windows_through timestamptz NOT NULL DEFAULT now();
COMMENT ON COLUMN sitemap_fold_state.windows_through IS
$$The moment through which folds have moved the rows whose visibility window opened or closed.$$;

-- A change of a row's window is a change the fold reads; it is not a
-- change of the page's entry, so updated_at stays.
CREATE OR REPLACE FUNCTION sitemap_urls_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id <> OLD.id THEN
        RAISE EXCEPTION 'sitemap_urls.id is managed by sitemapd and cannot change (row %)', OLD.id;
    END IF;
    IF (NEW.site, NEW.section, NEW.loc, NEW.lastmod, NEW.changefreq, NEW.priority,
        NEW.images, NEW.videos, NEW.news, NEW.hreflang, NEW.hreflang_cluster)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority,
        OLD.images, OLD.videos, OLD.news, OLD.hreflang, OLD.hreflang_cluster)
       AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at
    THEN
        NEW.updated_at := now();
    END IF;
    IF (NEW.site, NEW.section, NEW.loc, NEW.lastmod, NEW.changefreq, NEW.priority,
        NEW.images, NEW.videos, NEW.news, NEW.hreflang, NEW.hreflang_cluster, NEW.updated_at,
        NEW.visible_from, NEW.visible_until)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority,
        OLD.images, OLD.videos, OLD.news, OLD.hreflang, OLD.hreflang_cluster, OLD.updated_at,
        OLD.visible_from, OLD.visible_until)
    THEN
        NEW.change_xid := pg_current_xact_id();
    ELSIF NEW.change_xid IS DISTINCT FROM pg_current_xact_id() THEN
        NEW.change_xid := OLD.change_xid;
    END IF;
    RETURN NEW;
END $$;

-- The rows that have a window, by id: what a fold joins the rows it
-- places with to know which are outside theirs (its batch holds no
-- window). Untimed rows are not in it.
CREATE FUNCTION sitemap_window_reason(visible_from timestamptz, visible_until timestamptz,
                                      moment timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN visible_from > moment THEN 'not-yet-visible'
                WHEN visible_until <= moment THEN 'no-longer-visible' END
$$;
COMMENT ON FUNCTION sitemap_window_reason(timestamptz, timestamptz, timestamptz) IS
$$Why a row with this window is not listed at moment (not-yet-visible, no-longer-visible), or null when it is.$$;

-- Both look rows up through the partial indexes alone: a table never
-- analyzed (a bulk load, autovacuum behind) would be scanned whole.
CREATE FUNCTION sitemap_fold_windows() RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    since timestamptz;
    moment timestamptz := now();
    moved bigint[];
BEGIN
    SELECT windows_through INTO since FROM sitemap_fold_state;
    -- Rows whose window opened or closed since the last fold, and that a
    -- fold placed as the window was then: they go back to be placed again
    -- (listed or left out as it is now). Rows not placed yet are judged
    -- when they are.
    IF to_regclass('pg_temp.sitemap_fold_window_moves') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_window_moves (
            id bigint PRIMARY KEY, site text NOT NULL, loc text NOT NULL, change text NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    INSERT INTO sitemap_fold_window_moves (id, site, loc, change)
    SELECT d.id, d.site, d.loc, CASE WHEN d.listed THEN 'added' ELSE 'removed' END
    FROM (SELECT u.id, u.site, u.loc,
                 sitemap_window_reason(u.visible_from, u.visible_until, moment) IS NULL AS listed
          FROM sitemap_urls u
          WHERE u.visible_from > since AND u.visible_from <= moment
          UNION
          SELECT u.id, u.site, u.loc,
                 sitemap_window_reason(u.visible_from, u.visible_until, moment) IS NULL
          FROM sitemap_urls u
          WHERE u.visible_until > since AND u.visible_until <= moment) d
    CROSS JOIN LATERAL sitemap_placement_of(d.id) p
    WHERE (p.page IS NOT NULL) <> d.listed
      AND (p.page IS NOT NULL OR p.skip_reason IN ('not-yet-visible', 'no-longer-visible'))
    ON CONFLICT DO NOTHING;
    SELECT array_agg(id) INTO moved FROM sitemap_fold_window_moves;
    IF moved IS NOT NULL THEN
        PERFORM sitemap_unplace(moved);
        -- Crawlers told of the URL at the moment it entered or left.
        IF EXISTS (SELECT 1 FROM sitemap_change_stash) THEN
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT site, change, moment, array_agg(loc ORDER BY id)
            FROM sitemap_fold_window_moves GROUP BY site, change;
        ELSE
            INSERT INTO sitemap_changes (site, loc, change, committed_at)
            SELECT site, loc, change, moment FROM sitemap_fold_window_moves ORDER BY id;
        END IF;
        UPDATE sitemap_news_state SET due = '-infinity';
    END IF;
    UPDATE sitemap_fold_state SET windows_through = moment WHERE windows_through < moment;
END $$;
COMMENT ON FUNCTION sitemap_fold_windows() IS
$$Part of a fold, under its lock, before its rows are read: takes off their pages (or out of the left-out) the rows whose visibility window opened or closed since sitemap_fold_state.windows_through, to be placed again by this fold as the window now is, and writes their feed entries (added, removed) at that moment.$$;

CREATE FUNCTION sitemap_fold_hide_kept() RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    hidden bigint[];
BEGIN
    -- Without a timed row anywhere, nothing to look for among the rows
    -- read (a scan of a million costs 0.1 s).
    IF NOT EXISTS (SELECT 1 FROM sitemap_urls
                   WHERE visible_from IS NOT NULL OR visible_until IS NOT NULL) THEN
        RETURN;
    END IF;
    -- The timed rows through their partial indexes, not a probe per row
    -- read: a fold of a million updates reads no more than before.
    SELECT array_agg(f.id) INTO hidden
    FROM sitemap_fold_rows f
    JOIN (SELECT id, visible_from, visible_until FROM sitemap_urls
          WHERE visible_from IS NOT NULL OR visible_until IS NOT NULL) u ON u.id = f.id
    CROSS JOIN LATERAL sitemap_placement_of(f.id) p
    WHERE f.may_be_placed AND f.change_xid IS NOT NULL
      AND sitemap_window_reason(u.visible_from, u.visible_until, now()) IS NOT NULL
      AND p.page IS NOT NULL;
    IF hidden IS NOT NULL THEN
        PERFORM sitemap_unplace(hidden);
    END IF;
END $$;
COMMENT ON FUNCTION sitemap_fold_hide_kept() IS
$$Part of a fold, after sitemap_fold_begin: rows it read as changed whose window now leaves them out, and that it kept where they were placed (their entry the same), leave their page; the next fold places them as left out.$$;
