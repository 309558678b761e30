-- Placing a batch of new rows cost about 12 s per million; three things in
-- it did not need to. Found with auto_explain on a fold of 1M new rows, and
-- each change timed on that fold, side by side (BENCHMARKS.md):
--
-- * sitemap_placements' page index compared site and section names in the
--   database's collation, through strcoll, on every insert. In "C" they
--   compare bytewise; their order only groups a page's rows, and no query
--   sorts by them. About 1 s per million rows. The columns themselves
--   change collation, so every query comparing them keeps using the index.
--   The upgrade rebuilds that index and the skipped rows' one, holding the
--   table meanwhile.
-- * The batch was sorted twice: by section, to merge-join the sections'
--   few rows, then by section and id for the numbering. Merge joins are
--   priced out of the fold, so the sections are hashed.
-- * The numbering sorted every row with its loc; it now carries the loc's
--   hash, and the feed's entries are read from the rows before numbering.
--
-- The fold is replaced whole (PL/pgSQL has no other way); what it does is
-- unchanged.
ALTER TABLE sitemap_placements
    ALTER COLUMN site TYPE text COLLATE "C",
    ALTER COLUMN section TYPE text COLLATE "C";

-- Folds the changes of the pass under way into pages, at most max_rows
-- changed rows a call (all of them when NULL), beginning a pass when none
-- is under way. Returns how many rows it placed, changed in place or took
-- off a page; whether it began a pass; and whether it caught up: its pass
-- is done and no row waits to be placed again. Must run in a REPEATABLE
-- READ transaction that locked sitemap_fold_state before its first query,
-- so that its one snapshot is newer than the last fold's.
--
-- Rows are placed set-based. A section's new rows, in id order, fill its
-- last page and then new pages, each row taking its own bytes: a row starts
-- on the page where the running total of max(bytes * max_urls, room) falls,
-- in units of max_urls * room per page, where room is the page budget less
-- the batch's largest entry. So no page holds more than max_urls rows (each
-- takes at least room / max_urls of a unit) or more than its budget (a page
-- ends at most one entry past room). JIT stays off (compiling the plans of
-- working tables without statistics costs more than most folds),
-- sequential scans are priced out (migration 20261127000002), and so are
-- merge joins (below).
CREATE OR REPLACE FUNCTION sitemap_fold(max_rows bigint DEFAULT NULL, OUT folded bigint,
                                        OUT started boolean, OUT caught_up boolean)
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off SET enable_mergejoin = off AS $$
DECLARE
    previous pg_snapshot;
    current_snapshot pg_snapshot := pg_current_snapshot();
    seen timestamptz := clock_timestamp();
    -- the pass under way: its snapshot and the last row it read
    pass_snapshot pg_snapshot;
    after_xid xid8;
    after_id bigint;
    span record;
    batch_room bigint := max_rows;
    newest_placed bigint := (SELECT max(id) FROM sitemap_placements);
    pass_done boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'repeatable read' THEN
        RAISE EXCEPTION 'sitemap_fold() needs a REPEATABLE READ transaction';
    END IF;
    IF max_rows < 1 THEN
        RAISE EXCEPTION 'sitemap_fold(): max_rows must be at least 1, not %', max_rows;
    END IF;
    SELECT folded_through, folding_through, read_through_xid, read_through_id
    INTO previous, pass_snapshot, after_xid, after_id
    FROM sitemap_fold_state FOR UPDATE;
    started := pass_snapshot IS NULL;
    IF started THEN
        pass_snapshot := current_snapshot;
        after_xid := '0';
        after_id := 0;
    END IF;
    IF pg_snapshot_xmax(pass_snapshot) > pg_snapshot_xmax(current_snapshot) THEN
        RAISE EXCEPTION 'sitemap_fold(): the last fold saw more than this one'
            USING ERRCODE = 'serialization_failure',
                  HINT = 'lock sitemap_fold_state before the transaction''s first query';
    END IF;

    -- Working tables, kept by the connection between folds (emptied at
    -- each commit), so frequent folds do not churn the catalog.
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
            may_be_placed boolean NOT NULL
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

    -- A truncation took every row: every page empties, and what was
    -- written after it is placed below like any new row.
    IF EXISTS (SELECT 1 FROM sitemap_removals WHERE id IS NULL) THEN
        DELETE FROM sitemap_placements;
        DELETE FROM sitemap_unplaced;
        DELETE FROM sitemap_clusters;
        UPDATE sitemap_pages
        SET url_count = 0, bytes = 0, images = 0, videos = 0, alternates = 0,
            lastmod = greatest(clock_timestamp(), lastmod + interval '1 microsecond')
        WHERE url_count > 0;
    END IF;

    -- URLs that left: off their pages, into the feed.
    WITH taken AS (
        DELETE FROM sitemap_removals RETURNING id, site, loc
    ), dropped AS (
        DELETE FROM sitemap_placements p USING taken t
        WHERE p.id = t.id AND p.site = t.site AND p.loc_hash = sitemap_loc_hash(t.loc)
        RETURNING p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates, p.cluster, t.loc
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM dropped WHERE page IS NOT NULL
    ), clusters AS (
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT DISTINCT cluster FROM dropped WHERE cluster IS NOT NULL
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), -sum(images), -sum(videos), -sum(alternates), count(*), false
    FROM dropped WHERE page IS NOT NULL GROUP BY site, section, page;

    -- The pass's rows, on from where the last batch stopped: rows changed
    -- by transactions the last pass did not see (those that began after
    -- it, and those it saw still running) that this pass's snapshot sees.
    -- Then, in what room is left, rows a configuration change took off
    -- their page.
    FOR span IN SELECT * FROM sitemap_fold_ranges(previous, pass_snapshot) LOOP
        CONTINUE WHEN span.high < after_xid;
        EXIT WHEN batch_room = 0;
        batch_room := batch_room - sitemap_fold_read(greatest(span.low, after_xid), span.high,
                                                     after_xid, after_id, batch_room,
                                                     coalesce(newest_placed, 0));
    END LOOP;
    pass_done := batch_room IS NULL OR batch_room > 0;
    WITH requeued AS (
        DELETE FROM sitemap_unplaced
        WHERE id IN (SELECT id FROM sitemap_unplaced ORDER BY id LIMIT batch_room)
        RETURNING id
    )
    INSERT INTO sitemap_fold_rows
    SELECT NULL, u.id, u.site, u.section, u.loc, u.hreflang_cluster,
           sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos),
           coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0), true, true
    FROM requeued q JOIN sitemap_urls u ON u.id = q.id
    WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_rows f WHERE f.id = q.id);
    IF (SELECT count(*) FROM (SELECT 1 FROM sitemap_fold_rows LIMIT 10001) c) > 10000 THEN
        ANALYZE sitemap_fold_rows;
    END IF;

    -- A row that is now another URL (its site, section or loc changed)
    -- leaves the page it was placed on, and a row left out is looked at
    -- again (it may fit now); both are placed again below.
    WITH moved AS (
        DELETE FROM sitemap_placements p USING sitemap_fold_rows f
        WHERE p.id = f.id AND f.may_be_placed
          AND (p.page IS NULL
               OR (p.site, p.section, p.loc_hash) IS DISTINCT FROM (f.site, f.section, sitemap_loc_hash(f.loc)))
        RETURNING p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates, p.cluster
    ), clusters AS (
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT DISTINCT cluster FROM moved WHERE cluster IS NOT NULL
        ON CONFLICT DO NOTHING
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), -sum(images), -sum(videos), -sum(alternates), 0, false
    FROM moved WHERE page IS NOT NULL GROUP BY site, section, page;

    -- Clusters the changed rows name now or were folded with.
    INSERT INTO sitemap_fold_clusters (cluster)
    SELECT f.cluster FROM sitemap_fold_rows f WHERE f.cluster IS NOT NULL
    UNION
    SELECT p.cluster FROM sitemap_fold_rows f JOIN sitemap_placements p ON p.id = f.id AND f.may_be_placed
    WHERE p.cluster IS NOT NULL
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN
        PERFORM sitemap_rebuild_clusters();
    END IF;

    -- Rows still on their page whose entry changed: their own row, or the
    -- links of their cluster. Each takes its new size where it is, unless
    -- its page cannot hold what the growth adds: then the rows that grew
    -- leave it and are placed again, at the end of their section.
    WITH candidates AS (
        SELECT f.id, NOT f.replaced AS announced FROM sitemap_fold_rows f WHERE f.may_be_placed
        UNION
        SELECT p.id, true FROM sitemap_fold_clusters c JOIN sitemap_placements p ON p.cluster = c.cluster
        WHERE c.changed AND p.page IS NOT NULL
    ), sized AS MATERIALIZED (
        SELECT p.id, p.site, p.section, p.page, u.loc, bool_or(c.announced) AS announced,
               p.bytes AS old_bytes, p.images AS old_images, p.videos AS old_videos,
               p.alternates AS old_alternates, u.hreflang_cluster AS cluster,
               sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos)
                   + coalesce(k.link_bytes, 0) AS bytes,
               coalesce(jsonb_array_length(u.images), 0) AS images,
               coalesce(jsonb_array_length(u.videos), 0) AS videos,
               coalesce(cardinality(k.hrefs), 0) AS alternates
        FROM candidates c
        JOIN sitemap_placements p ON p.id = c.id AND p.page IS NOT NULL
        JOIN sitemap_urls u ON u.id = p.id
        LEFT JOIN sitemap_clusters k ON k.cluster = u.hreflang_cluster AND k.problem IS NULL
        GROUP BY p.id, u.id, k.cluster
    ), overfull AS (
        SELECT s.site, s.section, s.page
        FROM sized s
        JOIN sitemap_pages g ON g.site = s.site AND g.section = s.section AND g.page = s.page
        CROSS JOIN sitemap_settings c
        GROUP BY s.site, s.section, s.page, g.bytes, c.entry_budget
        HAVING g.bytes + sum(s.bytes - s.old_bytes) > c.entry_budget
    ), evicted AS (
        DELETE FROM sitemap_placements p USING sized s, overfull o
        WHERE p.id = s.id AND s.bytes > s.old_bytes
          AND o.site = s.site AND o.section = s.section AND o.page = s.page
        RETURNING p.id
    ), resized AS (
        UPDATE sitemap_placements p
        SET bytes = s.bytes, images = s.images, videos = s.videos, alternates = s.alternates,
            cluster = s.cluster
        FROM sized s
        WHERE p.id = s.id AND NOT EXISTS (SELECT 1 FROM evicted e WHERE e.id = s.id)
        RETURNING p.id
    ), requeued AS (
        -- placed again below; the feed hears of them here
        INSERT INTO sitemap_fold_rows
        SELECT NULL, s.id, s.site, s.section, s.loc, s.cluster, s.bytes - coalesce(k.link_bytes, 0),
               s.images, s.videos, true, true
        FROM sized s JOIN evicted e ON e.id = s.id
        LEFT JOIN sitemap_clusters k ON k.cluster = s.cluster AND k.problem IS NULL
        WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_rows f WHERE f.id = s.id)
    ), marked AS (
        UPDATE sitemap_fold_rows f SET replaced = true FROM evicted e WHERE f.id = e.id
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'updated', seen FROM sized WHERE announced
    ), deltas AS (
        SELECT s.site, s.section, s.page,
               -count(e.id) AS n,
               sum(CASE WHEN e.id IS NULL THEN s.bytes - s.old_bytes ELSE -s.old_bytes END) AS b,
               sum(CASE WHEN e.id IS NULL THEN s.images - s.old_images ELSE -s.old_images END) AS i,
               sum(CASE WHEN e.id IS NULL THEN s.videos - s.old_videos ELSE -s.old_videos END) AS v,
               sum(CASE WHEN e.id IS NULL THEN s.alternates - s.old_alternates ELSE -s.old_alternates END) AS a,
               count(*) AS rows_folded
        FROM sized s LEFT JOIN evicted e ON e.id = s.id
        GROUP BY s.site, s.section, s.page
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, n, b, i, v, a, rows_folded, true FROM deltas;
    -- Applied now: the placing below must see what the growth took.
    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE applied;

    -- Rows without a place get one, or the reason they are left out.
    WITH fresh AS MATERIALIZED (
        SELECT f.id, f.site, f.section, f.loc, sitemap_loc_hash(f.loc) AS loc_hash,
               f.cluster, f.replaced, f.images, f.videos,
               f.own_bytes + coalesce(k.link_bytes, 0) AS bytes,
               coalesce(cardinality(k.hrefs), 0) AS alternates,
               CASE WHEN s.site IS NULL THEN 'site not configured'
                    WHEN NOT sitemap_loc_in_scope(f.loc, s.origin, s.path_prefix)
                        THEN 'loc outside the site''s base URL ' || s.origin || s.path_prefix
                    WHEN f.own_bytes + coalesce(k.link_bytes, 0) > c.entry_budget
                        THEN format('entry of %s bytes, over the page budget of %s (max_bytes less %s)',
                                    f.own_bytes + coalesce(k.link_bytes, 0), c.entry_budget, 1024)
               END AS skip_reason
        FROM sitemap_fold_rows f
        CROSS JOIN sitemap_settings c
        LEFT JOIN sitemap_sites s ON s.site = f.site
        LEFT JOIN sitemap_clusters k ON k.cluster = f.cluster AND k.problem IS NULL
        WHERE NOT (f.may_be_placed AND EXISTS (SELECT 1 FROM sitemap_placements p WHERE p.id = f.id))
    ), sections AS MATERIALIZED (
        -- one look at each section's last page, not one per row
        SELECT g.site, g.section, coalesce(t.page, 1) AS tail,
               c.max_urls::bigint * greatest(1, c.entry_budget - g.largest) AS unit,
               c.max_urls::bigint AS max_urls,
               greatest(1, c.entry_budget - g.largest) AS room,
               -- where the new rows begin: past what the last page holds
               least(c.max_urls::bigint * greatest(1, c.entry_budget - g.largest),
                     greatest(coalesce(t.bytes, 0) * c.max_urls,
                              coalesce(t.url_count, 0) * greatest(1, c.entry_budget - g.largest))) AS start
        FROM (SELECT site, section, max(bytes) AS largest FROM fresh
              WHERE skip_reason IS NULL GROUP BY site, section) g
        CROSS JOIN sitemap_settings c
        LEFT JOIN LATERAL (SELECT p.page, p.url_count, p.bytes FROM sitemap_pages p
                           WHERE p.site = g.site AND p.section = g.section
                           ORDER BY p.page DESC LIMIT 1) t ON true
    ), numbered AS (
        -- byte order: the database's collation would compare every pair
        -- of names the slow way; and no loc, which makes the sort's rows
        -- twice as wide
        SELECT f.id, f.site, f.section, f.loc_hash, f.cluster, f.replaced, f.images, f.videos,
               f.bytes, f.alternates, s.tail, s.unit,
               s.start + coalesce(sum(greatest(f.bytes * s.max_urls, s.room))
                   OVER (PARTITION BY f.site COLLATE "C", f.section COLLATE "C" ORDER BY f.id
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::bigint AS offset_in_units
        FROM fresh f JOIN sections s ON s.site = f.site AND s.section = f.section
        WHERE f.skip_reason IS NULL
    ), placed AS (
        INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason,
                                        images, videos, alternates, cluster)
        SELECT r.id, r.site, r.section, r.loc_hash,
               (r.tail + r.offset_in_units / r.unit)::integer, r.bytes, NULL,
               r.images, r.videos, r.alternates, r.cluster
        FROM numbered r
        UNION ALL
        SELECT id, site, section, loc_hash, NULL, 0, skip_reason, 0, 0, 0, cluster
        FROM fresh WHERE skip_reason IS NOT NULL
        RETURNING id, site, section, page, bytes, images, videos, alternates
    ), announced AS (
        -- every row without a skip reason is numbered and placed
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'added', seen FROM fresh WHERE skip_reason IS NULL AND NOT replaced
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, count(*), sum(bytes), sum(images), sum(videos), sum(alternates), count(*), false
    FROM placed WHERE page IS NOT NULL GROUP BY site, section, page;

    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE NOT applied;
    SELECT coalesce(sum(rows_folded), 0) INTO folded FROM sitemap_fold_page_deltas;

    IF pass_done THEN
        UPDATE sitemap_fold_state
        SET folded_through = pass_snapshot, folding_through = NULL,
            read_through_xid = NULL, read_through_id = NULL, folded_at = seen;
    ELSE
        SELECT r.change_xid, r.id INTO after_xid, after_id FROM sitemap_fold_rows r
        WHERE r.change_xid IS NOT NULL ORDER BY r.change_xid DESC, r.id DESC LIMIT 1;
        UPDATE sitemap_fold_state
        SET folding_through = pass_snapshot, read_through_xid = after_xid,
            read_through_id = after_id, folded_at = seen;
    END IF;
    caught_up := pass_done AND NOT EXISTS (SELECT 1 FROM sitemap_unplaced);
END $$;
