-- New rows' locs are sized by the service, not by the fold's read.
--
-- sitemap_fold_read sized every row it read with sitemap_entry_bytes: five
-- searches of the loc and a count of its characters, 0.8 s of a fold of a
-- million new rows. A row past newest_placed has no placement, so no step
-- of sitemap_fold_begin reads its size: only the service does, when it
-- numbers the row, and it has the loc at hand and sizes it with the same
-- rule (src/sitemap/writer.rs, entry_bytes, held equal to the schema's by
-- a test). Such a row (may_be_placed false) now has its images and videos
-- alone in own_bytes; sitemap_fold_unplaced tells the service so
-- (loc_sized), and still finds an entry over the page budget itself,
-- sizing the loc only when six bytes a byte could be over. Both functions
-- are restated whole, with the same signatures.

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
    INSERT INTO sitemap_fold_rows (change_xid, id, site, section, loc, cluster, own_bytes, images, videos,
                                   replaced, may_be_placed, lastmod)
    SELECT u.change_xid, u.id, u.site, u.section, u.loc, u.hreflang_cluster,
           CASE WHEN u.id <= newest_placed THEN sitemap_entry_bytes(u.loc) ELSE 0 END
           + sitemap_media_bytes(u.images, u.videos),
           coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0), false,
           u.id <= newest_placed, u.lastmod
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
    ORDER BY u.change_xid, u.id LIMIT max_rows;
    GET DIAGNOSTICS taken = ROW_COUNT;
    RETURN taken;
END $$;

CREATE OR REPLACE FUNCTION sitemap_fold_working_tables() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- Working tables, kept by the connection between folds (emptied at
    -- each commit), so frequent folds do not churn the catalog.
    -- rows in runs that this fold finds changed
    IF to_regclass('pg_temp.sitemap_fold_in_runs') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_in_runs (
            id bigint NOT NULL,
            -- where the run placed it
            site text NOT NULL,
            section text NOT NULL,
            page integer NOT NULL,
            bytes integer NOT NULL,
            loc text NOT NULL,
            -- 'moved' (now another URL), 'kept' (its entry as placed: it
            -- stays), or 'changed' (placed alone from here on)
            fate text NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    IF to_regclass('pg_temp.sitemap_fold_rows') IS NULL THEN
        -- the rows to fold, as they are now
        CREATE TEMP TABLE sitemap_fold_rows (
            -- the transaction it was read as changed by (none when it is
            -- placed again)
            change_xid xid8 NULL,
            id bigint NOT NULL,
            site text NOT NULL,
            section text NOT NULL,
            loc text NOT NULL,
            cluster text NULL,
            -- the entry's bytes without its cluster's links
            own_bytes integer NOT NULL,
            images integer NOT NULL,
            videos integer NOT NULL,
            -- placed again (a configuration change, or it outgrew its
            -- page), not changed: not news
            replaced boolean NOT NULL,
            -- it may have a placement: the joins with sitemap_placements
            -- take only these (new rows of a bulk load have none, and
            -- finding that out took a scan of every placement)
            may_be_placed boolean NOT NULL,
            -- its lastmod, when it was read as changed: one later than the
            -- fold's time is served as that (sitemap_fold_clamp_lastmods)
            lastmod timestamptz NULL
        ) ON COMMIT DELETE ROWS;
        -- each step's per-page deltas, applied once at the end (a page's
        -- count only falls before then, so placing against it is safe)
        CREATE TEMP TABLE sitemap_fold_page_deltas (
            site text NOT NULL,
            section text NOT NULL,
            page integer NOT NULL,
            url_count bigint NOT NULL,
            bytes bigint NOT NULL,
            images bigint NOT NULL,
            videos bigint NOT NULL,
            alternates bigint NOT NULL,
            -- rows placed, changed in place or taken off the page
            rows_folded bigint NOT NULL,
            -- already added to the page (growth is, before placing)
            applied boolean NOT NULL DEFAULT false
        ) ON COMMIT DELETE ROWS;
        -- clusters whose membership may have changed, and whether the
        -- links they serve did
        CREATE TEMP TABLE sitemap_fold_clusters (
            cluster text PRIMARY KEY,
            -- as rebuilt from its rows (not built: it has none left)
            built boolean NOT NULL DEFAULT false,
            hreflangs text[] NULL,
            hrefs text[] NULL,
            link_bytes integer NULL,
            problem text NULL,
            changed boolean NOT NULL DEFAULT false
        ) ON COMMIT DELETE ROWS;
    END IF;
    -- made by this connection before the table had the column (see above)
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'pg_temp.sitemap_fold_rows'::regclass AND attname = 'lastmod') THEN
        ALTER TABLE pg_temp.sitemap_fold_rows ADD COLUMN lastmod timestamptz NULL;
    END IF;
    -- the fold under way in this transaction, from its beginning to its end
    IF to_regclass('pg_temp.sitemap_fold_pass') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_pass (
            pass_snapshot pg_snapshot NOT NULL,
            pass_done boolean NOT NULL,
            seen timestamptz NOT NULL,
            stashing boolean NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    -- what this fold's rows read tell its last steps without a scan of
    -- them: the last row read, when every row read is of one transaction,
    -- and whether any has a lastmod later than the fold's time
    IF to_regclass('pg_temp.sitemap_fold_rows_read') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_rows_read (
            last_xid xid8 NULL,
            last_id bigint NULL,
            later_lastmods boolean NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    IF to_regclass('pg_temp.sitemap_fold_lane') IS NULL THEN
        -- this fold's lane: the snapshot it folded through, when it is one
        CREATE TEMP TABLE sitemap_fold_lane (
            lane_snapshot pg_snapshot NULL,
            pass_placed_through bigint NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    -- The rows the service places (see above): every row read without a
    -- place, its size and reason to be left out as they are now.
    -- A view made by this connection before it had loc_sized is made again.
    IF to_regclass('pg_temp.sitemap_fold_unplaced') IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_attribute
                       WHERE attrelid = to_regclass('pg_temp.sitemap_fold_unplaced') AND attname = 'loc_sized') THEN
        DROP VIEW pg_temp.sitemap_fold_unplaced;
    END IF;
    IF to_regclass('pg_temp.sitemap_fold_unplaced') IS NULL THEN
        CREATE TEMP VIEW sitemap_fold_unplaced AS
        SELECT f.id, f.site, f.section, f.loc, sitemap_loc_hash(f.loc) AS loc_hash,
               f.cluster, f.replaced, f.images, f.videos,
               f.own_bytes + coalesce(k.link_bytes, 0) AS bytes,
               coalesce(cardinality(k.hrefs), 0) AS alternates,
               -- own_bytes counts the loc only of a row that may have a
               -- placement; the service sizes the others' locs
               f.may_be_placed AS loc_sized,
               CASE WHEN s.site IS NULL THEN 'site not configured'
                    WHEN NOT ((s.plain_base AND starts_with(f.loc, s.base) AND strpos(f.loc, '/.') = 0)
                              OR sitemap_loc_in_scope(f.loc, s.origin, s.path_prefix))
                        THEN 'loc outside the site''s base URL ' || s.origin || s.path_prefix
                    -- An entry takes at most six bytes a byte of its loc (a
                    -- quote written as &quot;) besides its markup: a loc the
                    -- service sizes is sized here only when it could be over.
                    WHEN NOT f.may_be_placed
                         AND f.own_bytes + coalesce(k.link_bytes, 0) + sitemap_entry_bytes('')
                             + 6 * octet_length(f.loc) <= (SELECT entry_budget FROM sitemap_settings)
                        THEN NULL
                    WHEN f.own_bytes + coalesce(k.link_bytes, 0)
                         + CASE WHEN f.may_be_placed THEN 0 ELSE sitemap_entry_bytes(f.loc) END
                         > (SELECT entry_budget FROM sitemap_settings)
                        THEN format('entry of %s bytes, over the page budget of %s (max_bytes less %s)',
                                    f.own_bytes + coalesce(k.link_bytes, 0)
                                    + CASE WHEN f.may_be_placed THEN 0 ELSE sitemap_entry_bytes(f.loc) END,
                                    (SELECT entry_budget FROM sitemap_settings), 1024)
               END AS skip_reason
        -- the settings in subqueries, not joined: a join is a step per row
        -- even for a query that reads no setting (the feed's)
        FROM sitemap_fold_rows f
        -- Each site's base, and whether the scope rule's shortcut holds for
        -- it (see sitemap_loc_in_scope), worked out once, not per row: 0.4 s
        -- per million rows. Grouped by its key, so a query that reads no
        -- column of it (the feed's) does not join it at all.
        LEFT JOIN (SELECT site, origin, path_prefix, origin || path_prefix AS base,
                          left(path_prefix, 1) = '/' AND origin = lower(origin) AS plain_base
                   FROM sitemap_sites GROUP BY site) s ON s.site = f.site
        LEFT JOIN sitemap_clusters k ON k.cluster = f.cluster AND k.problem IS NULL
        WHERE NOT (f.may_be_placed AND (EXISTS (SELECT 1 FROM sitemap_placements p WHERE p.id = f.id)
                                         OR EXISTS (SELECT 1 FROM sitemap_fold_in_runs r
                                                    WHERE r.id = f.id AND r.fate = 'kept')));
    END IF;
    -- This fold's removals: all of them, or at most max_rows.
    IF to_regclass('pg_temp.sitemap_fold_removals') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_removals (
            id bigint NULL,
            site text NULL,
            loc text NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
END $$;


COMMENT ON FUNCTION sitemap_fold_read(xid8, xid8, xid8, bigint, bigint, bigint) IS
$$Reads into sitemap_fold_rows, in (change_xid, id) order and with their lastmods, at most max_rows changed rows with change_xid in [low, high] after (after_xid, after_id), each marked with whether it may have a placement (no row past newest_placed has one); returns how many. A row that may not is sized without its loc: the service sizes its loc as it numbers it. Planned as an ordered walk of the index: a sort or a bitmap of the whole range would read all of it every batch.$$;
COMMENT ON FUNCTION sitemap_fold_working_tables() IS
$$Makes this connection's temporary working tables of a fold (kept between folds, emptied at each commit) and the view sitemap_fold_unplaced, where they are missing or older than their columns. sitemap_fold_begin calls it; the service calls it first when it applies the removals itself.$$;
