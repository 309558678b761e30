-- The feed entries folds keep are written out a number of entries at a
-- time, after the last kept row written, rather than a number of kept rows
-- from the oldest left. A fold of many small sites keeps a row per site (a
-- hundred entries each for 100,000 sites of 100 URLs), and every write-out
-- used to step over the index entries of the rows written out before it,
-- dead until a vacuum: 540 entries a second, where a fold of one site's
-- rows writes out hundreds of thousands.

DROP FUNCTION sitemap_write_out_feed(integer);

CREATE FUNCTION sitemap_write_out_feed(after_id bigint, max_entries integer,
                                       OUT entries bigint, OUT through_id bigint)
LANGUAGE sql AS $$
    WITH next AS (
        SELECT id, cardinality(locs) AS n,
               sum(cardinality(locs)) OVER (ORDER BY id) AS running
        FROM (SELECT id, locs FROM sitemap_change_stash
              WHERE id > after_id ORDER BY id LIMIT max_entries) s
    ), taken AS (
        DELETE FROM sitemap_change_stash c USING next
        WHERE c.id = next.id AND next.running - next.n < max_entries
        RETURNING c.id, c.site, c.change, c.committed_at, c.locs
    ), written AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT t.site, l.loc, t.change, t.committed_at
        FROM taken t CROSS JOIN LATERAL unnest(t.locs) WITH ORDINALITY AS l(loc, n)
        ORDER BY t.id, l.n
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM written), (SELECT max(id) FROM taken)
$$;
COMMENT ON FUNCTION sitemap_write_out_feed(bigint, integer) IS
$$Writes the rows of sitemap_change_stash after after_id out to sitemap_changes, in order, oldest first, up to max_entries entries (one row at least); returns how many entries, and the last row written (null when none was), after which the next call goes on. Run by one writer at a time (it locks sitemap_feed_writer first): all of it or none, never ahead of an older row.$$;
