-- Page placement moves out of the applications' transactions.
--
-- Until now triggers packed each new row into its page inside the writer's
-- transaction, under a lock on the row's section, and added every change to
-- its page's summary under that summary's row lock. Both locks were held
-- until the writer committed, so one long transaction (an ORM request, a
-- nightly job, a restore) made every other writer of its section or page
-- wait for it.
--
-- Now a writer's transaction touches only its own rows and append-only
-- structures:
--
-- * each row carries `change_xid`, the transaction that last changed what it
--   serves (set by default and by the update trigger, indexed);
-- * a deletion, a change of a row's site, section or loc, and a TRUNCATE are
--   appended to `sitemap_removals` (no index, no key: nothing to wait on).
--
-- The service folds committed changes into page membership
-- (`sitemap_placements`) and the page summaries (`sitemap_pages`) in short
-- transactions of its own (`sitemap_fold`). A fold reads with one snapshot
-- and remembers it: the next fold takes the rows changed by transactions
-- that snapshot did not see (newer ones, and those it saw in progress), so a
-- change that commits late is folded late, never skipped. Folds run one at a
-- time (each locks `sitemap_fold_state`), read the applications' rows
-- without locking them, and write only the tables below.
--
-- Every fold also appends what it folded to `sitemap_changes`, the change
-- feed: site, loc, added / updated / removed, in fold order.

DROP TRIGGER sitemap_urls_before_insert ON sitemap_urls;
DROP TRIGGER sitemap_urls_before_update ON sitemap_urls;
DROP TRIGGER sitemap_urls_after_insert ON sitemap_urls;
DROP TRIGGER sitemap_urls_after_update ON sitemap_urls;
DROP TRIGGER sitemap_urls_after_delete ON sitemap_urls;
DROP TRIGGER sitemap_urls_after_truncate ON sitemap_urls;
DROP FUNCTION sitemap_urls_before_insert(), sitemap_urls_after_insert(),
    sitemap_urls_after_update(), sitemap_urls_after_delete(), sitemap_urls_after_truncate(),
    sitemap_pack(sitemap_urls), sitemap_tail_setting(text, text),
    sitemap_evict_overflow(bigint[]),
    sitemap_apply_deltas(text[], text[], integer[], bigint[], bigint[]),
    sitemap_configure_limits(integer, bigint), sitemap_configure_site(text, text, text);
DROP TABLE sitemap_sections;

-- How a placement remembers the loc it was placed with: a row whose loc
-- hashes otherwise is another URL now. (Not STRICT, so it is inlined.)
CREATE FUNCTION sitemap_loc_hash(loc text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT hashtextextended(loc, 0)
$$;

-- Where each row is served, or why it is not. Written by folds alone.
CREATE TABLE sitemap_placements (
    -- the row's sitemap_urls.id
    id bigint PRIMARY KEY,
    -- the identity the row was placed with: a row whose site, section or
    -- loc no longer matches is a different URL, left out of this page
    site text NOT NULL,
    section text NOT NULL,
    loc_hash bigint NOT NULL, -- sitemap_loc_hash(loc)
    -- the page it is served on, for good; NULL when it is left out
    page integer NULL CHECK (page >= 1),
    -- bytes reserved for its entry (sitemap_entry_bytes); 0 when left out
    bytes integer NOT NULL CHECK (bytes >= 0),
    -- why the row is left out of every sitemap
    skip_reason text NULL,
    -- whether the service has logged the skip yet (it logs each one once)
    skip_logged boolean NOT NULL DEFAULT false,
    CHECK ((page IS NULL) <> (skip_reason IS NULL))
);

-- Every row keeps the page it was on.
INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason, skip_logged)
SELECT id, site, section, sitemap_loc_hash(loc), page,
       CASE WHEN page IS NULL THEN 0 ELSE sitemap_entry_bytes(loc) END,
       CASE WHEN page IS NULL THEN coalesce(skip_reason, 'site not configured') END,
       skip_logged
FROM sitemap_urls
WHERE page IS NOT NULL OR skip_reason IS NOT NULL;

-- A page is read as an ordered index range of its placements: never OFFSET.
CREATE INDEX sitemap_placements_page_idx ON sitemap_placements (site, section, page, id)
    WHERE page IS NOT NULL;
-- Rows left out, for counting them and for logging each once.
CREATE INDEX sitemap_placements_skipped_idx ON sitemap_placements (site, skip_logged)
    WHERE skip_reason IS NOT NULL;

ALTER TABLE sitemap_urls DROP COLUMN page, DROP COLUMN skip_reason, DROP COLUMN skip_logged;

-- NULL on rows placed before this migration. Added without a default and
-- given one after, so existing rows are not rewritten.
ALTER TABLE sitemap_urls ADD COLUMN change_xid xid8;
ALTER TABLE sitemap_urls ALTER COLUMN change_xid SET DEFAULT pg_current_xact_id();
CREATE INDEX sitemap_urls_change_idx ON sitemap_urls (change_xid);

-- A written change_xid would hide the row from folds: the writer's own
-- transaction goes there instead. The WHEN clause keeps PL/pgSQL off the
-- rows that take the default, which is every row of an ordinary write.
CREATE FUNCTION sitemap_urls_before_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_xid := pg_current_xact_id();
    RETURN NEW;
END $$;

CREATE TRIGGER sitemap_urls_before_insert BEFORE INSERT ON sitemap_urls
    FOR EACH ROW
    WHEN (NEW.change_xid IS DISTINCT FROM pg_current_xact_id())
    EXECUTE FUNCTION sitemap_urls_before_insert();

-- Keeps ids fixed and updated_at current, and marks the row changed when
-- anything it serves changed; an UPDATE that changes nothing marks nothing,
-- so no page's lastmod moves for it.
CREATE OR REPLACE FUNCTION sitemap_urls_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id <> OLD.id THEN
        RAISE EXCEPTION 'sitemap_urls.id is managed by sitemapd and cannot change (row %)', OLD.id;
    END IF;
    IF (NEW.site, NEW.section, NEW.loc, NEW.lastmod, NEW.changefreq, NEW.priority)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority)
       AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at
    THEN
        NEW.updated_at := now();
    END IF;
    IF (NEW.site, NEW.section, NEW.loc, NEW.lastmod, NEW.changefreq, NEW.priority, NEW.updated_at)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority, OLD.updated_at)
    THEN
        NEW.change_xid := pg_current_xact_id();
    ELSE
        NEW.change_xid := OLD.change_xid;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER sitemap_urls_before_update BEFORE UPDATE ON sitemap_urls
    FOR EACH ROW EXECUTE FUNCTION sitemap_urls_before_update();

-- URLs that left the table or became another URL, for the next fold; a row
-- with a NULL id says the table was truncated.
CREATE TABLE sitemap_removals (
    id bigint NULL,
    site text NULL,
    loc text NULL
);

CREATE FUNCTION sitemap_urls_after_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sitemap_removals (id, site, loc) SELECT id, site, loc FROM old_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION sitemap_urls_after_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sitemap_removals (id, site, loc) VALUES (OLD.id, OLD.site, OLD.loc);
    RETURN NULL;
END $$;

CREATE FUNCTION sitemap_urls_after_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sitemap_removals (id, site, loc) VALUES (NULL, NULL, NULL);
    RETURN NULL;
END $$;

CREATE TRIGGER sitemap_urls_after_delete AFTER DELETE ON sitemap_urls
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_urls_after_delete();
CREATE TRIGGER sitemap_urls_after_move AFTER UPDATE ON sitemap_urls
    FOR EACH ROW
    WHEN ((OLD.site, OLD.section, OLD.loc) IS DISTINCT FROM (NEW.site, NEW.section, NEW.loc))
    EXECUTE FUNCTION sitemap_urls_after_move();
CREATE TRIGGER sitemap_urls_after_truncate AFTER TRUNCATE ON sitemap_urls
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_urls_after_truncate();

-- Rows a configuration change took off their page (limits lowered, a base
-- URL changed), for the next fold to place again.
CREATE TABLE sitemap_unplaced (id bigint PRIMARY KEY);

-- The snapshot the last fold read with. Locked by every fold and every
-- configuration change, which makes them take turns.
CREATE TABLE sitemap_fold_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    folded_through pg_snapshot NOT NULL,
    folded_at timestamptz NOT NULL
);
-- This migration holds sitemap_urls exclusively: every row committed so far
-- is placed, and transactions still running write after it commits.
INSERT INTO sitemap_fold_state (folded_through, folded_at) VALUES (pg_current_snapshot(), now());

-- The change feed, oldest first. Read-only for applications; pruned by the
-- service (change_log_retention).
CREATE TABLE sitemap_changes (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site text NOT NULL,
    loc text NOT NULL,
    change text NOT NULL CHECK (change IN ('added', 'updated', 'removed')),
    -- when the fold saw the commit: never before it, at most one fold later
    committed_at timestamptz NOT NULL
);
-- Appended in time order, so a block range index finds the old end cheaply.
CREATE INDEX sitemap_changes_committed_idx ON sitemap_changes USING brin (committed_at);

-- Folds check every new row's scope, and PostgreSQL's regex engine has a
-- high fixed cost per call (two calls here: 4.5 us per row with the byte
-- count). The same rule now compares the origin with a prefix test, and
-- looks for dot segments only in the rare loc that holds "/.".
CREATE OR REPLACE FUNCTION sitemap_loc_in_scope(loc text, origin text, path_prefix text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT coalesce(
    lower(left(loc, char_length(origin))) = origin
    -- the authority ends where the origin does
    AND substr(loc, char_length(origin) + 1, 1) IN ('', '/', '?', '#')
    AND (strpos(loc, '/.') = 0
         OR substr(loc, char_length(origin) + 1) !~ '^[^?#]*/\.\.?([/?#]|$)')
    AND (starts_with(substr(loc, char_length(origin) + 1), path_prefix)
         OR (path_prefix = '/' AND substr(loc, char_length(origin) + 1, 1) IN ('', '?', '#'))),
    false)
$$;

-- Adds per-page deltas (URL count, bytes) to the summaries and moves each
-- listed page's lastmod forward (a zero delta is a change in place).
CREATE FUNCTION sitemap_apply_deltas(
    sites text[], sections text[], pages integer[], counts bigint[], byte_counts bigint[]
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF sites IS NULL THEN
        RETURN;
    END IF;
    WITH d AS (
        SELECT site, section, page, sum(n) AS n, sum(b) AS b
        FROM unnest(sites, sections, pages, counts, byte_counts) AS d(site, section, page, n, b)
        GROUP BY site, section, page
    ), existing AS (
        UPDATE sitemap_pages p
        SET url_count = p.url_count + d.n,
            bytes = p.bytes + d.b,
            lastmod = greatest(clock_timestamp(), p.lastmod + interval '1 microsecond')
        FROM d
        WHERE p.site = d.site AND p.section = d.section AND p.page = d.page
        RETURNING p.site, p.section, p.page
    )
    INSERT INTO sitemap_pages (site, section, page, url_count, bytes, lastmod)
    SELECT d.site, d.section, d.page, d.n, d.b, clock_timestamp()
    FROM d
    WHERE NOT EXISTS (SELECT 1 FROM existing e
                      WHERE e.site = d.site AND e.section = d.section AND e.page = d.page);
END $$;

-- Takes rows off their pages (they go to sitemap_unplaced, for the next fold
-- to place again) and subtracts them from their pages.
CREATE FUNCTION sitemap_unplace(ids bigint[]) RETURNS void
LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM sitemap_placements p WHERE p.id = ANY (ids)
        RETURNING p.id, p.site, p.section, p.page, p.bytes
    ), queued AS (
        INSERT INTO sitemap_unplaced (id) SELECT id FROM taken ON CONFLICT DO NOTHING
    )
    SELECT sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(n), array_agg(b))
    FROM (SELECT site, section, page, -count(*) AS n, -sum(bytes)::bigint AS b
          FROM taken WHERE page IS NOT NULL GROUP BY site, section, page) d;
$$;

-- Applies the service's limits. Raising them keeps every page as it is (new
-- rows fill up to the new limits); lowering them takes just the newest rows
-- off each page that no longer fits, to be placed again at the end of their
-- section.
CREATE FUNCTION sitemap_configure_limits(p_max_urls integer, p_entry_budget bigint) RETURNS void
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
        JOIN sitemap_placements v ON v.site = p.site AND v.section = p.section AND v.page = p.page
        WHERE p.url_count > p_max_urls OR p.bytes > p_entry_budget
        WINDOW w AS (PARTITION BY p.site, p.section, p.page ORDER BY v.id DESC)
    ) r
    WHERE r.url_count - r.moved_before > p_max_urls
       OR r.bytes - r.moved_bytes_before > p_entry_budget;
END $$;

-- Applies a site's base URL. When it changes, rows that left its scope leave
-- their pages, and rows left out before are looked at again.
CREATE FUNCTION sitemap_configure_site(p_site text, p_origin text, p_path_prefix text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM sitemap_sites
               WHERE site = p_site AND origin = p_origin AND path_prefix = p_path_prefix) THEN
        RETURN;
    END IF;
    INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES (p_site, p_origin, p_path_prefix)
    ON CONFLICT (site) DO UPDATE SET origin = excluded.origin, path_prefix = excluded.path_prefix;
    PERFORM sitemap_unplace(array_agg(p.id))
    FROM sitemap_placements p
    JOIN sitemap_urls u ON u.id = p.id
    WHERE p.site = p_site
      AND (p.skip_reason IS NOT NULL OR NOT sitemap_loc_in_scope(u.loc, p_origin, p_path_prefix));
END $$;

-- Folds every change committed since the last fold; returns how many rows
-- it placed, changed in place or took off a page. Must run in a REPEATABLE
-- READ transaction that locked sitemap_fold_state before its first query,
-- so that its one snapshot is newer than the last fold's.
--
-- Rows are placed set-based, as an import placed them: a section's new rows,
-- in id order, fill its last page while it has room for entries as large as
-- the largest among them, then pages of min(max_urls, budget / largest).
CREATE FUNCTION sitemap_fold() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    previous pg_snapshot;
    current_snapshot pg_snapshot := pg_current_snapshot();
    seen timestamptz := clock_timestamp();
    folded bigint;
    d_sites text[];
    d_sections text[];
    d_pages integer[];
    d_counts bigint[];
    d_bytes bigint[];
BEGIN
    IF current_setting('transaction_isolation') <> 'repeatable read' THEN
        RAISE EXCEPTION 'sitemap_fold() needs a REPEATABLE READ transaction';
    END IF;
    SELECT folded_through INTO previous FROM sitemap_fold_state FOR UPDATE;
    IF pg_snapshot_xmax(previous) > pg_snapshot_xmax(current_snapshot) THEN
        RAISE EXCEPTION 'sitemap_fold(): the last fold saw more than this one'
            USING ERRCODE = 'serialization_failure',
                  HINT = 'lock sitemap_fold_state before the transaction''s first query';
    END IF;

    -- Working tables, kept by the connection between folds (emptied at
    -- each commit), so frequent folds do not churn the catalog: the rows to
    -- fold, and each step's per-page deltas, applied once at the end (a
    -- page's count only falls before then, so placing against it is safe).
    IF to_regclass('pg_temp.sitemap_fold_rows') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_rows (
            id bigint NOT NULL,
            site text NOT NULL,
            section text NOT NULL,
            loc text NOT NULL,
            -- placed again after a configuration change, not changed: not news
            replaced boolean NOT NULL
        ) ON COMMIT DELETE ROWS;
        CREATE TEMP TABLE sitemap_fold_deltas (
            site text NOT NULL,
            section text NOT NULL,
            page integer NOT NULL,
            url_count bigint NOT NULL,
            bytes bigint NOT NULL,
            -- rows placed, changed in place or taken off the page
            rows_folded bigint NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;

    -- A truncation took every row: every page empties, and what was
    -- written after it is placed below like any new row.
    IF EXISTS (SELECT 1 FROM sitemap_removals WHERE id IS NULL) THEN
        DELETE FROM sitemap_placements;
        DELETE FROM sitemap_unplaced;
        UPDATE sitemap_pages
        SET url_count = 0, bytes = 0,
            lastmod = greatest(clock_timestamp(), lastmod + interval '1 microsecond')
        WHERE url_count > 0;
    END IF;

    -- URLs that left: off their pages, into the feed.
    WITH taken AS (
        DELETE FROM sitemap_removals RETURNING id, site, loc
    ), dropped AS (
        DELETE FROM sitemap_placements p USING taken t
        WHERE p.id = t.id AND p.site = t.site AND p.loc_hash = sitemap_loc_hash(t.loc)
        RETURNING p.site, p.section, p.page, p.bytes, t.loc
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM dropped WHERE page IS NOT NULL
    )
    INSERT INTO sitemap_fold_deltas
    SELECT site, section, page, -count(*), -sum(bytes), count(*)
    FROM dropped WHERE page IS NOT NULL GROUP BY site, section, page;

    -- Rows changed by transactions the last fold did not see: those that
    -- began after it, and those it saw still running. Then rows a
    -- configuration change took off their page.
    INSERT INTO sitemap_fold_rows
    SELECT u.id, u.site, u.section, u.loc, false FROM sitemap_urls u
    WHERE u.change_xid >= pg_snapshot_xmax(previous)
    UNION ALL
    SELECT u.id, u.site, u.section, u.loc, false FROM sitemap_urls u
    WHERE u.change_xid = ANY (ARRAY(SELECT pg_snapshot_xip(previous)));
    WITH requeued AS (
        DELETE FROM sitemap_unplaced RETURNING id
    )
    INSERT INTO sitemap_fold_rows
    SELECT u.id, u.site, u.section, u.loc, true
    FROM requeued q JOIN sitemap_urls u ON u.id = q.id
    WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_rows f WHERE f.id = q.id);
    IF (SELECT count(*) FROM (SELECT 1 FROM sitemap_fold_rows LIMIT 10001) c) > 10000 THEN
        ANALYZE sitemap_fold_rows;
    END IF;

    -- A row that is now another URL (its site, section or loc changed)
    -- leaves the page it was placed on; it is placed again below.
    WITH moved AS (
        DELETE FROM sitemap_placements p USING sitemap_fold_rows f
        WHERE p.id = f.id
          AND (p.site, p.section, p.loc_hash) IS DISTINCT FROM (f.site, f.section, sitemap_loc_hash(f.loc))
        RETURNING p.site, p.section, p.page, p.bytes
    )
    INSERT INTO sitemap_fold_deltas
    SELECT site, section, page, -count(*), -sum(bytes), 0
    FROM moved WHERE page IS NOT NULL GROUP BY site, section, page;

    -- A row still on its page changed in place: its page's lastmod moves.
    WITH touched AS (
        SELECT p.site, p.section, p.page, f.loc
        FROM sitemap_fold_rows f JOIN sitemap_placements p ON p.id = f.id
        WHERE p.page IS NOT NULL AND NOT f.replaced
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'updated', seen FROM touched
    )
    INSERT INTO sitemap_fold_deltas
    SELECT site, section, page, 0, 0, count(*) FROM touched GROUP BY site, section, page;

    -- Rows without a place get one, or the reason they are left out.
    WITH fresh AS MATERIALIZED (
        SELECT f.id, f.site, f.section, f.loc, f.replaced, sitemap_entry_bytes(f.loc) AS bytes,
               CASE WHEN s.site IS NULL THEN 'site not configured'
                    WHEN NOT sitemap_loc_in_scope(f.loc, s.origin, s.path_prefix)
                        THEN 'loc outside the site''s base URL ' || s.origin || s.path_prefix
               END AS skip_reason
        FROM sitemap_fold_rows f
        LEFT JOIN sitemap_sites s ON s.site = f.site
        WHERE NOT EXISTS (SELECT 1 FROM sitemap_placements p WHERE p.id = f.id)
    ), sections AS MATERIALIZED (
        -- one look at each section's last page, not one per row
        SELECT g.site, g.section,
               coalesce(t.page, 1) AS tail,
               greatest(0, least(c.max_urls - coalesce(t.url_count, 0),
                                 (c.entry_budget - coalesce(t.bytes, 0)) / g.largest)) AS room,
               greatest(1, least(c.max_urls, c.entry_budget / g.largest)) AS per_page
        FROM (SELECT site, section, max(bytes) AS largest FROM fresh
              WHERE skip_reason IS NULL GROUP BY site, section) g
        CROSS JOIN sitemap_settings c
        LEFT JOIN LATERAL (SELECT p.page, p.url_count, p.bytes FROM sitemap_pages p
                           WHERE p.site = g.site AND p.section = g.section
                           ORDER BY p.page DESC LIMIT 1) t ON true
    ), numbered AS (
        -- byte order: the database's collation would compare every pair
        -- of names the slow way
        SELECT f.*, row_number() OVER (PARTITION BY f.site COLLATE "C", f.section COLLATE "C"
                                       ORDER BY f.id) - 1 AS k
        FROM fresh f WHERE f.skip_reason IS NULL
    ), placed AS (
        INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason)
        SELECT r.id, r.site, r.section, sitemap_loc_hash(r.loc),
               (s.tail + (r.k - s.room + s.per_page) / s.per_page)::integer, r.bytes, NULL
        FROM numbered r JOIN sections s ON s.site = r.site AND s.section = r.section
        UNION ALL
        SELECT id, site, section, sitemap_loc_hash(loc), NULL, 0, skip_reason
        FROM fresh WHERE skip_reason IS NOT NULL
        RETURNING id, site, section, page, bytes
    ), announced AS (
        -- every numbered row is placed: announced as the window ordered them
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'added', seen FROM numbered WHERE NOT replaced
    )
    INSERT INTO sitemap_fold_deltas
    SELECT site, section, page, count(*), sum(bytes), count(*)
    FROM placed WHERE page IS NOT NULL GROUP BY site, section, page;

    SELECT array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
           array_agg(bytes), coalesce(sum(rows_folded), 0)
    INTO d_sites, d_sections, d_pages, d_counts, d_bytes, folded
    FROM sitemap_fold_deltas;
    PERFORM sitemap_apply_deltas(d_sites, d_sections, d_pages, d_counts, d_bytes);

    UPDATE sitemap_fold_state SET folded_through = current_snapshot, folded_at = seen;
    RETURN folded;
END $$;
