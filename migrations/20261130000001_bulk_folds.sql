-- Rows placed together are kept together: a bulk load costs a fold one
-- small row per 64 URLs instead of one placement row each.
--
-- A fold of 1M new rows spent most of its time writing sitemap_placements:
-- one heap row and two index entries per URL (8.6 s of a 23 s fold onto 5M
-- placed rows, BENCHMARKS.md). Now a fold places plain new rows (no
-- images, videos or hreflang cluster) in runs: up to 64 consecutive rows of
-- a section's batch on one page, as one row of sitemap_placement_runs whose
-- arrays list each row's id, the hash of the loc it was placed with and the
-- bytes it reserves. Rows with extensions are placed one by one in
-- sitemap_placements as before. Of the rows in runs that a fold finds
-- changed, one whose entry is as placed (a new lastmod, say) stays in its
-- run; a deleted or renamed one leaves its run and its page; any other
-- leaves its run for a placement of its own on the same page
-- (sitemap_explode), so every step after it is the one it was. A row
-- stands in one run or one placement, never both.
--
-- Readers see both through the view sitemap_placed (by page) and the
-- function sitemap_placement_of (by id). The upgrade keeps every existing
-- placement where it is; only rows placed from now on form runs.
--
-- And a fold of many rows leaves writing their feed entries to the service,
-- apart: one feed entry per URL cost 3.3 s per million rows of the fold's
-- transaction. Such a fold keeps the entries as arrays of locs, 10,000 at
-- most a row, in sitemap_change_stash (0.8 s per million); the service
-- writes them out to sitemap_changes in order, on a connection of its own,
-- while the next fold runs (sitemap_write_out_feed). While any are kept,
-- every fold keeps its entries there too, so the feed stays in fold order.
CREATE TABLE sitemap_placement_runs (
    run bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site text COLLATE "C" NOT NULL,
    section text COLLATE "C" NOT NULL,
    page integer NOT NULL CHECK (page >= 1),
    -- the bounds of ids, to find a row's run by its id
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    -- ids[i] was placed with loc hash loc_hashes[i] and reserves bytes[i]
    ids bigint[] NOT NULL,
    loc_hashes bigint[] NOT NULL,
    bytes integer[] NOT NULL,
    CHECK (cardinality(ids) >= 1 AND cardinality(ids) = cardinality(loc_hashes)
           AND cardinality(ids) = cardinality(bytes))
);
CREATE INDEX sitemap_placement_runs_page_idx ON sitemap_placement_runs (site, section, page);
CREATE INDEX sitemap_placement_runs_ids_idx ON sitemap_placement_runs
    USING gist (int8range(first_id, last_id, '[]'));
CREATE INDEX sitemap_placement_runs_last_idx ON sitemap_placement_runs (last_id);

-- Feed entries a fold kept for the service to write out: locs[i] is one
-- entry, written in (id, i) order.
CREATE TABLE sitemap_change_stash (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site text NOT NULL,
    change text NOT NULL CHECK (change IN ('added', 'updated', 'removed')),
    committed_at timestamptz NOT NULL,
    locs text[] NOT NULL
);
-- Stored as it is: compressing the locs cost more than writing them.
ALTER TABLE sitemap_change_stash ALTER COLUMN locs SET STORAGE EXTERNAL;

-- The writer's turn: whoever holds this row's lock writes out the stash.
CREATE TABLE sitemap_feed_writer (singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton));
INSERT INTO sitemap_feed_writer DEFAULT VALUES;

-- Writes the oldest `max_rows` rows of the stash out to the feed, in order;
-- returns how many entries. Run by one writer at a time (lock
-- sitemap_feed_writer first): all of it or none, and never ahead of an
-- older row.
CREATE FUNCTION sitemap_write_out_feed(max_rows integer) RETURNS bigint
LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM sitemap_change_stash
        WHERE id IN (SELECT id FROM sitemap_change_stash ORDER BY id LIMIT max_rows)
        RETURNING id, site, change, committed_at, locs
    ), written AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT t.site, l.loc, t.change, t.committed_at
        FROM taken t CROSS JOIN LATERAL unnest(t.locs) WITH ORDINALITY AS l(loc, n)
        ORDER BY t.id, l.n
        RETURNING 1
    )
    SELECT count(*) FROM written
$$;

-- Every placement, one row per URL, wherever it is kept. Filter it by
-- (site, section, page): both halves are read through their page indexes.
CREATE VIEW sitemap_placed AS
SELECT id, site, section, loc_hash, page, bytes, skip_reason, images, videos, alternates, cluster
FROM sitemap_placements
UNION ALL
SELECT m.id, r.site, r.section, m.loc_hash, r.page, m.bytes, NULL::text, 0, 0, 0, NULL::text
FROM sitemap_placement_runs r
CROSS JOIN LATERAL unnest(r.ids, r.loc_hashes, r.bytes) AS m(id, loc_hash, bytes);

-- The placement of the row `row_id`, if it has one: a lookup of each half
-- by its index (the view, filtered by id, would unnest every run).
CREATE FUNCTION sitemap_placement_of(row_id bigint) RETURNS SETOF sitemap_placed
LANGUAGE sql STABLE AS $$
    SELECT id, site, section, loc_hash, page, bytes, skip_reason, images, videos, alternates, cluster
    FROM sitemap_placements WHERE id = row_id
    UNION ALL
    SELECT row_id, r.site, r.section, r.loc_hashes[i], r.page, r.bytes[i], NULL::text, 0, 0, 0, NULL::text
    FROM sitemap_placement_runs r
    CROSS JOIN LATERAL array_position(r.ids, row_id) AS i
    WHERE int8range(r.first_id, r.last_id, '[]') @> row_id AND i IS NOT NULL
$$;

-- Which of the rows `wanted` stand in a run: the run, where it is, and what
-- the row was placed with. Few rows are looked up by id, one index probe each; many (a
-- bulk update or delete) by reading the runs over their ids once and
-- joining, where a probe each took 46 s per million rows.
CREATE FUNCTION sitemap_run_members(wanted bigint[])
RETURNS TABLE (run bigint, site text, section text, page integer, id bigint, loc_hash bigint,
               bytes integer)
-- planned for many rows: joined with a working table without an index, the
-- default guess of 1,000 planned a scan of it for each row
LANGUAGE plpgsql STABLE ROWS 100000 AS $$
BEGIN
    IF cardinality(wanted) <= 10000 THEN
        RETURN QUERY
        SELECT r.run, r.site, r.section, r.page, w.id, r.loc_hashes[i], r.bytes[i]
        FROM unnest(wanted) AS w(id)
        JOIN sitemap_placement_runs r ON int8range(r.first_id, r.last_id, '[]') @> w.id
        CROSS JOIN LATERAL array_position(r.ids, w.id) AS i
        WHERE i IS NOT NULL;
    ELSE
        RETURN QUERY
        SELECT r.run, r.site, r.section, r.page, m.id, m.loc_hash, m.bytes
        FROM sitemap_placement_runs r
        CROSS JOIN LATERAL unnest(r.ids, r.loc_hashes, r.bytes) AS m(id, loc_hash, bytes)
        JOIN unnest(wanted) AS w(id) ON w.id = m.id
        WHERE r.last_id >= (SELECT min(x) FROM unnest(wanted) x)
          AND r.first_id <= (SELECT max(x) FROM unnest(wanted) x);
    END IF;
END $$;

-- Takes the rows `wanted` out of the runs they stand in; the rest of each
-- run it touches stays a run. With `place_alone`, each is placed one by one
-- on the same page with the same reservation, and pages and summaries are
-- unchanged; without, they are off their pages, and the caller subtracts
-- them from their summaries.
CREATE FUNCTION sitemap_explode(wanted bigint[], place_alone boolean DEFAULT true) RETURNS void
LANGUAGE sql AS $$
    WITH leaving AS MATERIALIZED (
        SELECT run, id FROM sitemap_run_members(wanted)
    ), taken AS (
        DELETE FROM sitemap_placement_runs r WHERE r.run IN (SELECT run FROM leaving)
        RETURNING r.run, r.site, r.section, r.page, r.ids, r.loc_hashes, r.bytes
    ), members AS MATERIALIZED (
        SELECT t.run, t.site, t.section, t.page, m.id, m.loc_hash, m.bytes, l.id IS NOT NULL AS leaving
        FROM taken t
        CROSS JOIN LATERAL unnest(t.ids, t.loc_hashes, t.bytes) AS m(id, loc_hash, bytes)
        LEFT JOIN leaving l ON l.id = m.id
    ), kept AS (
        INSERT INTO sitemap_placement_runs (site, section, page, first_id, last_id, ids, loc_hashes, bytes)
        SELECT site, section, page, min(id), max(id), array_agg(id), array_agg(loc_hash), array_agg(bytes)
        FROM members WHERE NOT leaving
        GROUP BY run, site, section, page
    )
    INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason,
                                    images, videos, alternates, cluster)
    SELECT id, site, section, loc_hash, page, bytes, NULL, 0, 0, 0, NULL
    FROM members WHERE leaving AND place_alone;
$$;

-- As before (migration 20261125000001), for rows in runs too.
CREATE OR REPLACE FUNCTION sitemap_unplace(ids bigint[]) RETURNS void
LANGUAGE sql AS $$
    SELECT sitemap_explode(ids);
    WITH taken AS (
        DELETE FROM sitemap_placements p WHERE p.id = ANY (ids)
        RETURNING p.id, p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates
    ), queued AS (
        INSERT INTO sitemap_unplaced (id) SELECT id FROM taken ON CONFLICT DO NOTHING
    )
    SELECT sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(n),
                                array_agg(b), array_agg(i), array_agg(v), array_agg(a))
    FROM (SELECT site, section, page, -count(*) AS n, -sum(bytes)::bigint AS b,
                 -sum(images)::bigint AS i, -sum(videos)::bigint AS v, -sum(alternates)::bigint AS a
          FROM taken WHERE page IS NOT NULL GROUP BY site, section, page) d;
$$;

-- The scope rule of migration 20261124000001, with a shortcut first for the
-- usual loc: one that starts with the origin (lowercase, as configured) and
-- the path prefix as written and has no "/." is in scope by every clause of
-- the rule. The full rule took 1.4 s of CPU per million rows a fold places;
-- the shortcut decides most of them with two byte comparisons.
CREATE OR REPLACE FUNCTION sitemap_loc_in_scope(loc text, origin text, path_prefix text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT (starts_with(loc, origin || path_prefix) AND strpos(loc, '/.') = 0
        AND left(path_prefix, 1) = '/' AND origin = lower(origin))
    OR coalesce(
    lower(left(loc, char_length(origin))) = origin
    -- the authority ends where the origin does
    AND substr(loc, char_length(origin) + 1, 1) IN ('', '/', '?', '#')
    AND (strpos(loc, '/.') = 0
         OR substr(loc, char_length(origin) + 1) !~ '^[^?#]*/\.\.?([/?#]|$)')
    AND (starts_with(substr(loc, char_length(origin) + 1), path_prefix)
         OR (path_prefix = '/' AND substr(loc, char_length(origin) + 1, 1) IN ('', '?', '#'))),
    false)
$$;

-- As before (migration 20261124000001), reading runs too.
CREATE OR REPLACE FUNCTION sitemap_configure_limits(p_max_urls integer, p_entry_budget bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sitemap_settings SET max_urls = p_max_urls, entry_budget = p_entry_budget
    WHERE (max_urls, entry_budget) IS DISTINCT FROM (p_max_urls, p_entry_budget);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM sitemap_unplace(array_agg(r.id))
    FROM (
        SELECT v.id, p.url_count, p.bytes,
               row_number() OVER w - 1 AS moved_before,
               coalesce(sum(v.bytes) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                   AS moved_bytes_before
        FROM sitemap_pages p
        JOIN sitemap_placed v ON v.site = p.site AND v.section = p.section AND v.page = p.page
        WHERE p.url_count > p_max_urls OR p.bytes > p_entry_budget
        WINDOW w AS (PARTITION BY p.site, p.section, p.page ORDER BY v.id DESC)
    ) r
    WHERE r.url_count - r.moved_before > p_max_urls
       OR r.bytes - r.moved_bytes_before > p_entry_budget;
END $$;

-- As before (migration 20261124000001), reading runs too.
CREATE OR REPLACE FUNCTION sitemap_configure_site(p_site text, p_origin text, p_path_prefix text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM sitemap_sites
               WHERE site = p_site AND origin = p_origin AND path_prefix = p_path_prefix) THEN
        RETURN;
    END IF;
    INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES (p_site, p_origin, p_path_prefix)
    ON CONFLICT (site) DO UPDATE SET origin = excluded.origin, path_prefix = excluded.path_prefix;
    PERFORM sitemap_unplace(array_agg(p.id))
    FROM sitemap_placed p
    JOIN sitemap_urls u ON u.id = p.id
    WHERE p.site = p_site
      AND (p.skip_reason IS NOT NULL OR NOT sitemap_loc_in_scope(u.loc, p_origin, p_path_prefix));
END $$;

-- As before (migration 20261125000002), finding placements in runs too.
CREATE OR REPLACE FUNCTION sitemap_news_listing(p_site text, window_end timestamptz)
RETURNS TABLE (id bigint, n bigint, updated_at timestamptz, bytes integer)
LANGUAGE sql STABLE AS $$
SELECT u.id,
       row_number() OVER (ORDER BY sitemap_news_published(u.news) DESC, u.id DESC),
       u.updated_at, sitemap_news_entry_bytes(u.loc, u.news)
FROM sitemap_urls u
CROSS JOIN LATERAL sitemap_placement_of(u.id) p
WHERE u.site = p_site AND u.news IS NOT NULL
  AND sitemap_news_published(u.news) > window_end - interval '48 hours'
  AND p.page IS NOT NULL AND p.site = u.site AND p.section = u.section
  AND p.loc_hash = sitemap_loc_hash(u.loc)
$$;

-- The fold as in migration 20261129000002, but for four things: plain new
-- rows are placed in runs (`ran`), the rows it changes or removes leave
-- their runs first unless their entry is as the run placed it, a truncation
-- empties the runs too, and a fold that reads 10,000 rows or more, or finds
-- entries kept, keeps its feed entries.
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
    newest_placed bigint := greatest((SELECT max(id) FROM sitemap_placements),
                                     (SELECT max(last_id) FROM sitemap_placement_runs));
    pass_done boolean;
    -- its feed entries go to the stash (see above)
    stashing boolean := EXISTS (SELECT 1 FROM sitemap_change_stash);
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
    -- rows in runs that this fold removes, or finds changed
    IF to_regclass('pg_temp.sitemap_fold_in_runs') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_in_runs (
            id bigint PRIMARY KEY,
            -- where the run placed it
            site text NOT NULL,
            section text NOT NULL,
            page integer NOT NULL,
            bytes integer NOT NULL,
            loc text NOT NULL,
            -- 'gone' (deleted, or renamed before this batch), 'moved' (now
            -- another URL), 'kept' (its entry as placed: it stays), or
            -- 'changed' (placed alone from here on)
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
        DELETE FROM sitemap_placement_runs;
        DELETE FROM sitemap_unplaced;
        DELETE FROM sitemap_clusters;
        UPDATE sitemap_pages
        SET url_count = 0, bytes = 0, images = 0, videos = 0, alternates = 0,
            lastmod = greatest(clock_timestamp(), lastmod + interval '1 microsecond')
        WHERE url_count > 0;
    END IF;

    -- URLs that left: off their pages, into the feed. Those in runs leave
    -- them here; the statement after it takes the ones placed alone.
    INSERT INTO sitemap_fold_in_runs (id, site, section, page, bytes, loc, fate)
    SELECT h.id, h.site, h.section, h.page, h.bytes, r.loc, 'gone'
    FROM sitemap_run_members(ARRAY(SELECT id FROM sitemap_removals WHERE id IS NOT NULL)) h
    JOIN sitemap_removals r ON r.id = h.id AND r.site = h.site AND sitemap_loc_hash(r.loc) = h.loc_hash
    ON CONFLICT DO NOTHING;
    PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs), false);
    WITH announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM sitemap_fold_in_runs WHERE NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT site, 'removed', seen, array_agg(loc) FROM sitemap_fold_in_runs WHERE stashing
        GROUP BY site, id / 10000 ORDER BY min(id)
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), 0, 0, 0, count(*), false
    FROM sitemap_fold_in_runs GROUP BY site, section, page;
    WITH taken AS (
        DELETE FROM sitemap_removals RETURNING id, site, loc
    ), dropped AS (
        DELETE FROM sitemap_placements p USING taken t
        WHERE p.id = t.id AND p.site = t.site AND p.loc_hash = sitemap_loc_hash(t.loc)
        RETURNING p.id, p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates, p.cluster, t.loc
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM dropped WHERE page IS NOT NULL AND NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT site, 'removed', seen, array_agg(loc) FROM dropped WHERE page IS NOT NULL AND stashing
        GROUP BY site, id / 10000 ORDER BY min(id)
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
    stashing := stashing OR (SELECT count(*) FROM (SELECT 1 FROM sitemap_fold_rows LIMIT 10000) c) = 10000;
    -- Changed rows that stand in a run: one whose entry is as the run
    -- placed it (the same site, section and loc, still plain: an update of
    -- lastmod, say) stays there, and only its page's lastmod moves (below);
    -- the others are placed one by one from here on, so every step below
    -- finds them where it always did.
    -- One that is another URL now leaves its run and its page, to be placed
    -- again below.
    DELETE FROM sitemap_fold_in_runs;
    INSERT INTO sitemap_fold_in_runs (id, site, section, page, bytes, loc, fate)
    SELECT f.id, h.site, h.section, h.page, h.bytes, f.loc,
           CASE WHEN (f.site, f.section, sitemap_loc_hash(f.loc)) IS DISTINCT FROM (h.site, h.section, h.loc_hash)
                    THEN 'moved'
                WHEN f.own_bytes = h.bytes AND f.images = 0 AND f.videos = 0 AND f.cluster IS NULL
                    THEN 'kept'
                ELSE 'changed'
           END
    FROM sitemap_run_members(ARRAY(SELECT id FROM sitemap_fold_rows WHERE may_be_placed)) h
    JOIN sitemap_fold_rows f ON f.id = h.id;
    PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs WHERE fate = 'changed'));
    PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs WHERE fate = 'moved'), false);
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), 0, 0, 0, 0, false
    FROM sitemap_fold_in_runs WHERE fate = 'moved' GROUP BY site, section, page;

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
        SELECT site, loc, 'updated', seen FROM sized WHERE announced AND NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT site, 'updated', seen, array_agg(loc) FROM sized WHERE announced AND stashing
        GROUP BY site, id / 10000 ORDER BY min(id)
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

    -- Rows changed where their run holds them: news, and their pages'
    -- lastmod moves.
    WITH announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'updated', seen FROM sitemap_fold_in_runs WHERE fate = 'kept' AND NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT site, 'updated', seen, array_agg(loc) FROM sitemap_fold_in_runs
        WHERE fate = 'kept' AND stashing
        GROUP BY site, id / 10000 ORDER BY min(id)
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, 0, 0, 0, 0, 0, count(*), false
    FROM sitemap_fold_in_runs WHERE fate = 'kept' GROUP BY site, section, page;

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
        WHERE NOT (f.may_be_placed AND (EXISTS (SELECT 1 FROM sitemap_placements p WHERE p.id = f.id)
                                         OR EXISTS (SELECT 1 FROM sitemap_fold_in_runs k
                                                    WHERE k.id = f.id AND k.fate = 'kept')))
    ), sections AS MATERIALIZED (
        -- one look at each section's last page, not one per row
        SELECT g.site, g.section, row_number() OVER () AS k, coalesce(t.page, 1) AS tail,
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
        -- by the section's number: comparing names, even bytewise, made
        -- this sort take 2.7 s per million rows, against 0.6 s; and no loc,
        -- which makes the sort's rows twice as wide
        SELECT f.id, f.site, f.section, f.loc_hash, f.cluster, f.replaced, f.images, f.videos,
               f.bytes, f.alternates, s.k, s.tail, s.unit,
               s.start + coalesce(sum(greatest(f.bytes * s.max_urls, s.room))
                   OVER (PARTITION BY s.k ORDER BY f.id
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::bigint AS offset_in_units,
               s.room * 64 AS run_units,
               f.images = 0 AND f.videos = 0 AND f.alternates = 0 AND f.cluster IS NULL AS plain
        FROM fresh f JOIN sections s ON s.site = f.site AND s.section = f.section
        WHERE f.skip_reason IS NULL
    ), ran AS (
        -- plain rows, up to 64 of a section's in a row on one page (each
        -- row takes at least room of the running total, counted from the
        -- page's start); the arrays list them in the same order, as the
        -- aggregates read them. Grouped by the section's number, as sorted.
        INSERT INTO sitemap_placement_runs (site, section, page, first_id, last_id, ids, loc_hashes, bytes)
        SELECT s.site, s.section, g.page, g.first_id, g.last_id, g.ids, g.loc_hashes, g.bytes
        FROM (SELECT r.k, r.page, min(r.id) AS first_id, max(r.id) AS last_id,
                     array_agg(r.id) AS ids, array_agg(r.loc_hash) AS loc_hashes, array_agg(r.bytes) AS bytes
              FROM (SELECT n.*, (n.tail + n.offset_in_units / n.unit)::integer AS page
                    FROM numbered n WHERE n.plain) r
              GROUP BY r.k, r.page, r.offset_in_units % r.unit / r.run_units) g
        JOIN sections s ON s.k = g.k
        RETURNING site, section, page, cardinality(ids) AS url_count,
                  (SELECT sum(b) FROM unnest(bytes) b) AS bytes
    ), placed AS (
        INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason,
                                        images, videos, alternates, cluster)
        SELECT r.id, r.site, r.section, r.loc_hash,
               (r.tail + r.offset_in_units / r.unit)::integer, r.bytes, NULL,
               r.images, r.videos, r.alternates, r.cluster
        FROM numbered r WHERE NOT r.plain
        UNION ALL
        SELECT id, site, section, loc_hash, NULL, 0, skip_reason, 0, 0, 0, cluster
        FROM fresh WHERE skip_reason IS NOT NULL
        RETURNING id, site, section, page, bytes, images, videos, alternates
    ), announced AS (
        -- every row without a skip reason is numbered and placed
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'added', seen FROM fresh WHERE skip_reason IS NULL AND NOT replaced AND NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT site, 'added', seen, array_agg(loc) FROM fresh
        WHERE skip_reason IS NULL AND NOT replaced AND stashing
        GROUP BY site, id / 10000 ORDER BY min(id)
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, count(*), sum(bytes), sum(images), sum(videos), sum(alternates), count(*), false
    FROM placed WHERE page IS NOT NULL GROUP BY site, section, page
    UNION ALL
    SELECT site, section, page, sum(url_count), sum(bytes), 0, 0, 0, sum(url_count), false
    FROM ran GROUP BY site, section, page;

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
