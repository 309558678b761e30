-- A fold notes the lastmods later than its time as it reads its rows.
--
-- sitemap_fold_clamp_lastmods found them by looking every row the fold had
-- read up again in sitemap_urls: 3.0 s of the folds of a million updated
-- rows. sitemap_fold_read has each row's lastmod at hand, and notes those
-- later than now() (sitemap_fold_future_lastmods) as it reads.

CREATE OR REPLACE FUNCTION sitemap_fold_read(low xid8, high xid8, after_xid xid8, after_id bigint,
                                             max_rows bigint, newest_placed bigint)
RETURNS bigint
LANGUAGE plpgsql SET enable_sort = off SET enable_bitmapscan = off SET enable_seqscan = off AS $$
DECLARE
    -- the transactions read whole: those after the one the last batch
    -- stopped in, which is read on from its last row
    whole_from xid8 := CASE WHEN low = after_xid THEN (low::text::bigint + 1)::text::xid8 ELSE low END;
    taken bigint;
BEGIN
    IF to_regclass('pg_temp.sitemap_fold_future_lastmods') IS NULL THEN
        -- kept by the connection between folds, as the fold's other
        -- working tables are
        CREATE TEMP TABLE sitemap_fold_future_lastmods (
            id bigint NOT NULL,
            site text NOT NULL,
            section text NOT NULL,
            lastmod timestamptz NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    WITH read AS MATERIALIZED (
        SELECT u.change_xid, u.id, u.site, u.section, u.loc, u.hreflang_cluster, u.images, u.videos,
               u.lastmod
        FROM ((SELECT * FROM sitemap_urls
               -- a range of one xid, not an equality: ordered by (change_xid,
               -- id), the scan can only be that index's, positioned at the row
               -- (the primary key's, filtered by xid, walks every later row)
               WHERE low = after_xid AND change_xid >= low AND change_xid <= low AND id > after_id
               ORDER BY change_xid, id LIMIT max_rows)
              UNION ALL
              (SELECT * FROM sitemap_urls
               WHERE change_xid >= whole_from AND change_xid <= high
               ORDER BY change_xid, id LIMIT max_rows)) u
        ORDER BY u.change_xid, u.id LIMIT max_rows
    ), future AS (
        INSERT INTO sitemap_fold_future_lastmods (id, site, section, lastmod)
        SELECT id, site, section, lastmod FROM read WHERE lastmod > now()
    ), added AS (
        INSERT INTO sitemap_fold_rows
        SELECT change_xid, id, site, section, loc, hreflang_cluster,
               sitemap_entry_bytes(loc) + sitemap_media_bytes(images, videos),
               coalesce(jsonb_array_length(images), 0), coalesce(jsonb_array_length(videos), 0), false,
               id <= newest_placed
        FROM read
    )
    SELECT count(*) INTO taken FROM read;
    RETURN taken;
END $$;

CREATE OR REPLACE FUNCTION sitemap_fold_clamp_lastmods() RETURNS void
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM sitemap_lastmod_clamps) THEN
        DELETE FROM sitemap_lastmod_clamps c
        USING sitemap_fold_rows f
        WHERE c.id = f.id AND f.change_xid IS NOT NULL;
    END IF;
    -- a fold that read no changed row (one of removals only) has none
    IF to_regclass('pg_temp.sitemap_fold_future_lastmods') IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO sitemap_lastmod_clamps (id, site, section, written_lastmod, served_lastmod)
    SELECT id, site, section, lastmod, now() FROM sitemap_fold_future_lastmods
    ON CONFLICT (id) DO UPDATE
        SET site = excluded.site, section = excluded.section,
            written_lastmod = excluded.written_lastmod, served_lastmod = excluded.served_lastmod;
END $$;

COMMENT ON FUNCTION sitemap_fold_read(xid8, xid8, xid8, bigint, bigint, bigint) IS
$$Reads into sitemap_fold_rows, in (change_xid, id) order, at most max_rows changed rows with change_xid in [low, high] after (after_xid, after_id), each marked with whether it may have a placement (no row past newest_placed has one), and into sitemap_fold_future_lastmods those whose lastmod is later than now(); returns how many. Planned as an ordered walk of the index: a sort or a bitmap of the whole range would read all of it every batch.$$;
COMMENT ON FUNCTION sitemap_fold_clamp_lastmods() IS
$$Step of a fold, before sitemap_fold_end: records the rows it read whose lastmod is later than the fold's time (now(), noted by sitemap_fold_read), to be served with that time, and forgets the clamps of rows changed since.$$;
