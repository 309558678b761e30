-- Rows kept in their runs are announced as their fates are found.
--
-- A fold of updated lastmods found every row read kept in its run, wrote
-- each to sitemap_fold_in_runs with its loc, counted them by page from
-- there and read them back for their feed entries: of the 1.1 s a fold
-- of 200,000 such rows took, writing them took about 0.2 s, and counting
-- and reading them back 0.15 s more. Their fates are now found, counted
-- and announced in one statement, from rows held in memory; a kept row is
-- written to sitemap_fold_in_runs only when sitemap_fold_unplaced is
-- read, which leaves the kept rows out. Within a fold, the kept rows'
-- feed entries now come before those of the rows placed alone. The
-- function is restated whole, with the same signature, and its comment
-- says that the view is not to be read when nothing is to be placed.

CREATE OR REPLACE FUNCTION sitemap_fold_begin(max_rows bigint DEFAULT NULL, removals_taken bigint DEFAULT NULL,
                                   OUT started boolean, OUT nothing_to_place boolean)
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
    batch_room bigint;
    -- removals this fold takes, and whether it may leave some (see above)
    removals bigint;
    more_removals boolean;
    -- the ids they span, when they are many
    lowest_removed bigint;
    highest_removed bigint;
    -- the newest row placed once this fold's removals are applied
    newest_placed bigint;
    -- the newest row placed when the pass began: no row the pass reads was
    -- placed since (see above)
    pass_placed_through bigint;
    -- the transactions lanes folded since the pass's snapshot, through
    -- this one
    lane_through pg_snapshot;
    lane_rows bigint;
    lane boolean := false;
    pass_done boolean;
    -- how many rows read may have a placement, and whether any names a
    -- cluster: a batch of new plain rows (a bulk load) skips the steps for
    -- those
    placed_read bigint;
    any_cluster boolean;
    -- the rows in sitemap_fold_rows when they are counted with those: only
    -- the growth below (the rows of a cluster whose links changed) adds
    -- any after that
    rows_read bigint;
    -- the transactions the rows read were changed by, first and last, and
    -- the last row read of the last
    first_xid_read xid8;
    last_xid_read xid8;
    last_id_read bigint;
    later_lastmods boolean;
    -- the ids the rows read that may have a placement span
    lowest_placed_read bigint;
    highest_placed_read bigint;
    -- the changed rows found in runs, by fate (see above)
    changed_in_runs bigint := 0;
    moved_in_runs bigint := 0;
    kept_in_runs bigint := 0;
    -- its feed entries go to the stash (see above)
    stashing boolean := EXISTS (SELECT 1 FROM sitemap_change_stash);
    -- the caller's enable_sort, restored after the statements that hash
    sorting text := current_setting('enable_sort');
BEGIN
    IF current_setting('transaction_isolation') <> 'repeatable read' THEN
        RAISE EXCEPTION 'sitemap_fold_begin() needs a REPEATABLE READ transaction';
    END IF;
    IF max_rows < 1 THEN
        RAISE EXCEPTION 'sitemap_fold_begin(): max_rows must be at least 1, not %', max_rows;
    END IF;
    SELECT s.folded_through, s.folding_through, s.read_through_xid, s.read_through_id,
           s.lane_through, s.pass_placed_through
    INTO previous, pass_snapshot, after_xid, after_id, lane_through, pass_placed_through
    FROM sitemap_fold_state s FOR UPDATE;
    started := pass_snapshot IS NULL;
    IF started THEN
        pass_snapshot := current_snapshot;
        after_xid := '0';
        after_id := 0;
    END IF;
    IF pg_snapshot_xmax(coalesce(lane_through, pass_snapshot)) > pg_snapshot_xmax(current_snapshot) THEN
        RAISE EXCEPTION 'sitemap_fold_begin(): the last fold saw more than this one'
            USING ERRCODE = 'serialization_failure',
                  HINT = 'lock sitemap_fold_state before the transaction''s first query';
    END IF;

    PERFORM sitemap_fold_working_tables();
    IF EXISTS (SELECT 1 FROM sitemap_fold_pass) THEN
        RAISE EXCEPTION 'sitemap_fold_begin(): a fold began in this transaction already; one fold a transaction';
    END IF;

    -- This fold's removals: those the service took (see above), or all of
    -- them, or at most max_rows.
    IF removals_taken IS NOT NULL THEN
        removals := removals_taken;
    ELSIF max_rows IS NULL THEN
        WITH taken AS (
            DELETE FROM sitemap_removals RETURNING id, site, loc
        )
        INSERT INTO sitemap_fold_removals SELECT id, site, loc FROM taken;
        GET DIAGNOSTICS removals = ROW_COUNT;
    ELSE
        -- by their tuple ids: a bounded take without an index, which would
        -- cost every deleting writer an insert per row
        WITH taken AS (
            DELETE FROM sitemap_removals
            WHERE ctid = ANY (ARRAY(SELECT ctid FROM sitemap_removals LIMIT max_rows))
            RETURNING id, site, loc
        )
        INSERT INTO sitemap_fold_removals SELECT id, site, loc FROM taken;
        GET DIAGNOSTICS removals = ROW_COUNT;
    END IF;
    more_removals := coalesce(removals >= max_rows, false);
    -- many removals keep their entries, as many rows read do (below)
    stashing := stashing OR removals >= 10000;
    UPDATE sitemap_fold_state SET removals_left = more_removals;
    IF removals > 10000 AND removals_taken IS NULL THEN
        ANALYZE sitemap_fold_removals;
        SELECT min(id), max(id) INTO lowest_removed, highest_removed FROM sitemap_fold_removals;
    END IF;
    batch_room := max_rows - removals;

    -- A truncation took every row: every page empties, and what was
    -- written after it is placed below like any new row. Removals taken
    -- with it find nothing placed.
    IF EXISTS (SELECT 1 FROM sitemap_fold_removals WHERE id IS NULL) THEN
        DELETE FROM sitemap_placements;
        DELETE FROM sitemap_placement_runs;
        DELETE FROM sitemap_unplaced;
        DELETE FROM sitemap_clusters;
        UPDATE sitemap_pages
        SET url_count = 0, bytes = 0, images = 0, videos = 0, alternates = 0,
            lastmod = greatest(clock_timestamp(), lastmod + interval '1 microsecond')
        WHERE url_count > 0;
    END IF;

    -- URLs that left: off their pages, into the feed. Those in runs leave
    -- them here, their runs found once: a run they all leave goes whole,
    -- and only the runs they leave partly are taken apart and written
    -- again without them. The statement after it takes the ones placed
    -- alone. Removals the service took it has applied to the runs itself.
    -- Few removals find their runs by id, one probe each; many read the
    -- runs over their ids once and join them to the removals, one hash of
    -- them (not two, as sitemap_run_members and a join with its result
    -- make). Their feed entries and page deltas come from the same
    -- statement, not noted on the way.
    -- A URL renamed away twice has two removals: one is kept, as a sort
    -- of the batch costs less than inserting it with ON CONFLICT.
    IF removals_taken IS NULL THEN
        WITH gone AS MATERIALIZED (
            SELECT DISTINCT ON (h.id) h.run, h.id, h.site, h.section, h.page, h.bytes, r.loc
            FROM (SELECT m.run, m.id, m.site, m.section, m.page, m.loc_hash, m.bytes
                  FROM sitemap_run_members(ARRAY(SELECT id FROM sitemap_fold_removals WHERE id IS NOT NULL)) m
                  WHERE removals <= 10000
                  UNION ALL
                  SELECT k.run, m.id, k.site, k.section, k.page, m.loc_hash, m.bytes
                  FROM sitemap_placement_runs k
                  CROSS JOIN LATERAL unnest(k.ids, k.loc_hashes, k.bytes) AS m(id, loc_hash, bytes)
                  WHERE removals > 10000
                    AND k.last_id >= lowest_removed AND k.first_id <= highest_removed) h
            JOIN sitemap_fold_removals r ON r.id = h.id AND r.site = h.site AND sitemap_loc_hash(r.loc) = h.loc_hash
            ORDER BY h.id
        ), leaving AS (
            SELECT run, count(*) AS members FROM gone GROUP BY run
        ), taken AS (
            DELETE FROM sitemap_placement_runs r USING leaving l
            WHERE r.run = l.run
            RETURNING r.run, r.site, r.section, r.page, r.ids, r.loc_hashes, r.bytes,
                      cardinality(r.ids) > l.members AS partly
        ), rewritten AS (
            INSERT INTO sitemap_placement_runs (site, section, page, first_id, last_id, ids, loc_hashes, bytes)
            SELECT t.site, t.section, t.page, min(m.id), max(m.id),
                   array_agg(m.id ORDER BY m.id), array_agg(m.loc_hash ORDER BY m.id), array_agg(m.bytes ORDER BY m.id)
            FROM taken t
            CROSS JOIN LATERAL unnest(t.ids, t.loc_hashes, t.bytes) AS m(id, loc_hash, bytes)
            WHERE t.partly AND NOT EXISTS (SELECT 1 FROM gone g WHERE g.id = m.id)
            GROUP BY t.run, t.site, t.section, t.page
        ), announced AS (
            INSERT INTO sitemap_changes (site, loc, change, committed_at)
            SELECT site, loc, 'removed', seen FROM gone WHERE NOT stashing
        ), per_page AS MATERIALIZED (
            SELECT site, section, page, count(*) AS n, sum(bytes) AS bytes FROM gone GROUP BY site, section, page
        ), kept AS (
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT site, 'removed', seen, array_agg(loc)
            FROM gone
            WHERE stashing
            GROUP BY site,
                     CASE WHEN site = ANY (ARRAY(SELECT site FROM per_page GROUP BY site HAVING sum(n) > 10000))
                          THEN id / 10000 END
            ORDER BY min(id)
        )
        INSERT INTO sitemap_fold_page_deltas
        SELECT site, section, page, -n, -bytes, 0, 0, 0, n, false FROM per_page;
    END IF;
    WITH taken AS (
        SELECT id, site, loc FROM sitemap_fold_removals WHERE id IS NOT NULL
    ), dropped AS (
        DELETE FROM sitemap_placements p USING taken t
        WHERE p.id = t.id AND p.site = t.site AND p.loc_hash = sitemap_loc_hash(t.loc)
        RETURNING p.id, p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates, p.cluster, t.loc
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM dropped WHERE page IS NOT NULL AND NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT e.site, 'removed', seen, array_agg(e.loc)
        FROM dropped e
        JOIN (SELECT site, count(*) > 10000 AS many FROM dropped WHERE page IS NOT NULL GROUP BY site) c
            ON c.site = e.site
        WHERE e.page IS NOT NULL AND stashing
        GROUP BY e.site, CASE WHEN c.many THEN e.id / 10000 END ORDER BY min(e.id)
    ), clusters AS (
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT DISTINCT cluster FROM dropped WHERE cluster IS NOT NULL
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), -sum(images), -sum(videos), -sum(alternates), count(*), false
    FROM dropped WHERE page IS NOT NULL GROUP BY site, section, page;

    -- Looked up after the removals: a row they took off its page has no
    -- placement now, and a pass that begins after a rename of every row
    -- reads none that may have one (each skips the steps below for those).
    newest_placed := greatest((SELECT max(id) FROM sitemap_placements),
                              (SELECT max(last_id) FROM sitemap_placement_runs));
    IF started THEN
        pass_placed_through := coalesce(newest_placed, 0);
    END IF;

    -- The pass's rows, on from where the last batch stopped: rows changed
    -- by transactions the last pass did not see (those that began after
    -- it, and those it saw still running) that this pass's snapshot sees.
    -- Then, in what room is left, rows a configuration change took off
    -- their page.
    -- A lane first: while a pass reads a bulk load, the few rows it would
    -- read after the transaction it is in, and those committed since its
    -- snapshot (up to 10,000), are folded on their own, by a fold that
    -- reads nothing else, so they wait for one batch of the pass at most,
    -- not for all of it. More than that waits for the pass.
    -- While removals are left, a fold reads nothing and begins no pass.
    IF more_removals THEN
        started := false;
        pass_done := false;
    ELSIF NOT started THEN
        SELECT count(*) INTO lane_rows
        FROM (SELECT 1
              FROM sitemap_fold_lane_ranges(previous, pass_snapshot, after_xid, lane_through,
                                            current_snapshot) r,
                   LATERAL (SELECT 1 FROM sitemap_urls u
                            WHERE u.change_xid >= r.low AND u.change_xid <= r.high
                            LIMIT 10001) x
              LIMIT 10001) c;
        lane := lane_rows BETWEEN 1 AND 10000;
    END IF;
    IF more_removals THEN
        NULL;
    ELSIF lane THEN
        FOR span IN SELECT * FROM sitemap_fold_lane_ranges(previous, pass_snapshot, after_xid,
                                                           lane_through, current_snapshot) LOOP
            PERFORM sitemap_fold_read(span.low, span.high, '0', 0, NULL, coalesce(newest_placed, 0));
        END LOOP;
        batch_room := 0;
        pass_done := false;
    ELSE
        FOR span IN SELECT * FROM sitemap_fold_ranges(previous, pass_snapshot) LOOP
            CONTINUE WHEN span.high < after_xid;
            -- past a lane, the pass reads on only in the transaction it was in
            EXIT WHEN batch_room = 0 OR (lane_through IS NOT NULL AND span.low > after_xid);
            batch_room := batch_room - sitemap_fold_read(greatest(span.low, after_xid),
                                                         CASE WHEN lane_through IS NULL THEN span.high
                                                              ELSE least(span.high, after_xid) END,
                                                         after_xid, after_id, batch_room,
                                                         coalesce(pass_placed_through, newest_placed, 0));
        END LOOP;
        pass_done := batch_room IS NULL OR batch_room > 0;
    END IF;
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
    stashing := stashing OR (SELECT count(*) FROM (SELECT 1 FROM sitemap_fold_rows LIMIT 10000) c) = 10000;
    -- Rows read as changed have a change_xid and a lastmod; those placed
    -- again have neither, and so have the rows added after this count.
    SELECT count(*), count(*) FILTER (WHERE may_be_placed), coalesce(bool_or(cluster IS NOT NULL), false),
           min(id) FILTER (WHERE may_be_placed), max(id) FILTER (WHERE may_be_placed),
           min(change_xid), max(change_xid), max(id) FILTER (WHERE change_xid IS NOT NULL),
           coalesce(bool_or(lastmod > now()), false)
    INTO rows_read, placed_read, any_cluster, lowest_placed_read, highest_placed_read,
         first_xid_read, last_xid_read, last_id_read, later_lastmods
    FROM sitemap_fold_rows;
    IF placed_read > 0 THEN
        -- Changed rows that stand in a run: one whose entry is as the run
        -- placed it (the same site, section and loc, still plain: an update of
        -- lastmod, say) stays there, and only its page's lastmod moves (below);
        -- the others are placed one by one from here on, so every step below
        -- finds them where it always did.
        -- One that is another URL now leaves its run and its page, to be placed
        -- again below.
        DELETE FROM sitemap_fold_in_runs;
        -- Few are looked up by id; many read the runs over their ids once,
        -- joined with the rows read themselves: through sitemap_run_members,
        -- their ids went into an array, out of it into a hash, and its
        -- result into another (about 150 of 400 ms for 150,000 rows).
        -- Their fates are found, counted by page and announced in one
        -- statement. A kept row is written to sitemap_fold_in_runs only
        -- when sitemap_fold_unplaced will be read, which leaves out the rows
        -- kept: when every row read is kept and no cluster changed, the
        -- service does not read it (nothing_to_place, below). Writing
        -- 200,000 kept rows there with their locs, then counting them and
        -- reading them back for their entries, took about 0.35 s of the
        -- 1.1 s a fold of them took.
        -- Counted by hashing: the pages are few, and sorting every row by
        -- its page took 70 of the 100 ms this took for 150,000 kept rows.
        -- The sites with more than 10,000 rows kept have their entries kept
        -- by blocks of ids (see above).
        PERFORM set_config('enable_sort', 'off', true);
        WITH fates AS MATERIALIZED (
            SELECT f.id, h.site, h.section, h.page, h.bytes, f.loc,
                   CASE WHEN (f.site, f.section, sitemap_loc_hash(f.loc)) IS DISTINCT FROM (h.site, h.section, h.loc_hash)
                            THEN 'moved'
                        WHEN f.own_bytes = h.bytes AND f.images = 0 AND f.videos = 0 AND f.cluster IS NULL
                            THEN 'kept'
                        ELSE 'changed'
                   END AS fate
            FROM (SELECT m.id, m.site, m.section, m.page, m.loc_hash, m.bytes
                  FROM sitemap_run_members(ARRAY(SELECT id FROM sitemap_fold_rows WHERE may_be_placed)) m
                  WHERE placed_read <= 10000
                  UNION ALL
                  SELECT m.id, k.site, k.section, k.page, m.loc_hash, m.bytes
                  FROM sitemap_placement_runs k
                  CROSS JOIN LATERAL unnest(k.ids, k.loc_hashes, k.bytes) AS m(id, loc_hash, bytes)
                  WHERE placed_read > 10000
                    AND k.last_id >= lowest_placed_read AND k.first_id <= highest_placed_read) h
            JOIN sitemap_fold_rows f ON f.id = h.id AND f.may_be_placed
        ), per_page AS MATERIALIZED (
            SELECT site, section, page, count(*) FILTER (WHERE fate = 'changed') AS changed,
                   count(*) FILTER (WHERE fate = 'moved') AS moved, count(*) FILTER (WHERE fate = 'kept') AS kept
            FROM fates GROUP BY site, section, page
        ), noted AS (
            INSERT INTO sitemap_fold_in_runs (id, site, section, page, bytes, loc, fate)
            SELECT id, site, section, page, bytes, loc, fate FROM fates
            WHERE fate <> 'kept'
               OR (SELECT sum(kept) FROM per_page) < rows_read
               OR EXISTS (SELECT 1 FROM sitemap_fold_clusters)
        ), kept_pages AS (
            INSERT INTO sitemap_fold_page_deltas
            SELECT site, section, page, 0, 0, 0, 0, 0, kept, false FROM per_page WHERE kept > 0
        ), announced AS (
            INSERT INTO sitemap_changes (site, loc, change, committed_at)
            SELECT site, loc, 'updated', seen FROM fates WHERE fate = 'kept' AND NOT stashing
        ), kept AS (
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT site, 'updated', seen, array_agg(loc)
            FROM fates
            WHERE fate = 'kept' AND stashing
            GROUP BY site,
                     CASE WHEN site = ANY (ARRAY(SELECT site FROM per_page GROUP BY site HAVING sum(kept) > 10000))
                          THEN id / 10000 END
            ORDER BY min(id)
        )
        SELECT coalesce(sum(changed), 0), coalesce(sum(moved), 0), coalesce(sum(kept), 0)
        INTO changed_in_runs, moved_in_runs, kept_in_runs
        FROM per_page;
        PERFORM set_config('enable_sort', sorting, true);
        IF changed_in_runs > 0 THEN
            PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs WHERE fate = 'changed'));
        END IF;
        IF moved_in_runs > 0 THEN
            PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs WHERE fate = 'moved'), false);
            INSERT INTO sitemap_fold_page_deltas
            SELECT site, section, page, -count(*), -sum(bytes), 0, 0, 0, 0, false
            FROM sitemap_fold_in_runs WHERE fate = 'moved' GROUP BY site, section, page;
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
    END IF;

    -- Clusters the changed rows name now or were folded with. A row of a
    -- cluster is placed alone, never in a run, so without a placement
    -- naming a cluster, only the rows' own can be.
    IF any_cluster OR (placed_read > 0 AND EXISTS (SELECT 1 FROM sitemap_placements WHERE cluster IS NOT NULL)) THEN
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT f.cluster FROM sitemap_fold_rows f WHERE f.cluster IS NOT NULL
        UNION
        SELECT p.cluster FROM sitemap_fold_rows f JOIN sitemap_placements p ON p.id = f.id AND f.may_be_placed
        WHERE p.cluster IS NOT NULL
        ON CONFLICT DO NOTHING;
    END IF;
    IF EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN
        PERFORM sitemap_rebuild_clusters();
    END IF;

    -- Rows still on their page whose entry changed: their own row, or the
    -- links of their cluster. Each takes its new size where it is, unless
    -- its page cannot hold what the growth adds: then the rows that grew
    -- leave it and are placed again, at the end of their section.
    IF placed_read > 0 OR EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN
        -- Each once, before the rows are joined: grouping them after, the
        -- join sorted every row with its loc and media. A row read is
        -- sized as read; only the members of a changed cluster that were
        -- not read are read and sized here.
        WITH candidates AS (
            SELECT id, bool_or(announced) AS announced
            FROM (SELECT f.id, NOT f.replaced AS announced FROM sitemap_fold_rows f WHERE f.may_be_placed
                  UNION ALL
                  SELECT p.id, true FROM sitemap_fold_clusters c JOIN sitemap_placements p ON p.cluster = c.cluster
                  WHERE c.changed AND p.page IS NOT NULL) c
            GROUP BY id
        ), entries AS (
            SELECT c.id, c.announced, f.loc, f.cluster, f.own_bytes, f.images, f.videos
            FROM candidates c JOIN sitemap_fold_rows f ON f.id = c.id AND f.may_be_placed
            UNION ALL
            SELECT c.id, c.announced, u.loc, u.hreflang_cluster,
                   sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos),
                   coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0)
            FROM candidates c JOIN sitemap_urls u ON u.id = c.id
            WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_rows f WHERE f.id = c.id AND f.may_be_placed)
        ), sized AS MATERIALIZED (
            SELECT p.id, p.site, p.section, p.page, e.loc, e.announced,
                   p.bytes AS old_bytes, p.images AS old_images, p.videos AS old_videos,
                   p.alternates AS old_alternates, e.cluster,
                   e.own_bytes + coalesce(k.link_bytes, 0) AS bytes,
                   e.images, e.videos,
                   coalesce(cardinality(k.hrefs), 0) AS alternates
            FROM entries e
            JOIN sitemap_placements p ON p.id = e.id AND p.page IS NOT NULL
            LEFT JOIN sitemap_clusters k ON k.cluster = e.cluster AND k.problem IS NULL
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
              -- most keep their sizes (a new lastmod): those stay as they are
              AND (p.bytes, p.images, p.videos, p.alternates, p.cluster)
                  IS DISTINCT FROM (s.bytes, s.images, s.videos, s.alternates, s.cluster)
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
            SELECT site, loc, 'updated', seen FROM sized WHERE announced AND NOT stashing
        ), kept AS (
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT e.site, 'updated', seen, array_agg(e.loc)
            FROM sized e
            JOIN (SELECT site, count(*) > 10000 AS many FROM sized WHERE announced GROUP BY site) c
                ON c.site = e.site
            WHERE e.announced AND stashing
            GROUP BY e.site, CASE WHEN c.many THEN e.id / 10000 END ORDER BY min(e.id)
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
    END IF;
    -- Applied now: the placing below must see what the growth took.
    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE applied;

    -- Every row read stays as its run placed it, or none was read: there
    -- is nothing to place, and the service does not read
    -- sitemap_fold_unplaced (the rows kept were not noted for it; its
    -- anti-join of every row read with those kept took about 100 ms of a
    -- fold of 125,000 updated lastmods). A row stands in one run at most,
    -- and each row read is in sitemap_fold_rows once, so the counts say it.
    -- Rows are added after rows_read was counted only for a cluster whose
    -- links changed, and every such cluster is in sitemap_fold_clusters:
    -- with none there, rows_read is the count, and counting again took a
    -- scan of every row read (29 ms for 150,000).
    nothing_to_place := CASE WHEN kept_in_runs = 0 THEN NOT EXISTS (SELECT 1 FROM sitemap_fold_rows)
                             WHEN kept_in_runs < rows_read THEN false
                             WHEN NOT EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN true
                             ELSE kept_in_runs = (SELECT count(*) FROM sitemap_fold_rows) END;
    INSERT INTO sitemap_fold_pass VALUES (pass_snapshot, pass_done, seen, stashing);
    -- Read in (change_xid, id) order: of one transaction, the last row read
    -- is the highest id. Otherwise sitemap_fold_end looks for it.
    INSERT INTO sitemap_fold_rows_read
    VALUES (CASE WHEN first_xid_read = last_xid_read THEN last_xid_read END,
            CASE WHEN first_xid_read = last_xid_read THEN last_id_read END, later_lastmods);
    INSERT INTO sitemap_fold_lane VALUES (CASE WHEN lane THEN current_snapshot END, pass_placed_through);
END $$;

COMMENT ON FUNCTION sitemap_fold_begin(bigint, bigint) IS
$$Step 1 of a fold, in a REPEATABLE READ transaction that locked sitemap_fold_state before its first query. Takes the removals (at most max_rows; all when NULL) and applies them, or, when removals_taken is given, counts that many as taken and applied to the runs by the service, and takes off sitemap_placements those it left in sitemap_fold_removals; while it may have left some (removals_left), reads nothing else. While a pass is under way, folds as a lane the rows of sitemap_fold_lane_ranges when there are 1 to 10,000 of them, and reads nothing else. Otherwise begins a pass when none is under way and reads changed rows of the transactions the pass covers (sitemap_fold_ranges, sitemap_fold_read), as many as max_rows leaves room for after the removals. Then applies moves and rows changed in place, takes off their pages the rows that outgrew them, writes the 'updated' and 'removed' feed entries, and leaves the rows to place, sized, in the temporary view sitemap_fold_unplaced for the service to number. Returns whether it began a pass, and whether every row it read stays as its run placed it, so that there is nothing to place (nothing_to_place): then sitemap_fold_unplaced is not to be read, as the rows kept are not noted for it. One fold a transaction.$$;
