-- The lastmod clamps are counted as they are written, per site and
-- section: `/metrics`, `/api/v1/stats` and the HTML view read the counts
-- instead of counting the clamps. At 100M rows, 8M of them clamped, the
-- count joined with the rows ran past the scrape's 2 s on every scrape,
-- and the clamps alone took 0.6 s of both cores. Only folds write clamps,
-- a few at a time, so the triggers cost a fold next to nothing.
--
-- A clamp is counted from the fold that writes it until the fold that
-- reads its row changed again (the count joined with the rows dropped it
-- at the row's write): the counts are as of the last fold, as the page
-- summaries are.

CREATE TABLE sitemap_lastmod_clamp_counts (
    site text NOT NULL,
    section text NOT NULL,
    clamps bigint NOT NULL,
    PRIMARY KEY (site, section)
);
COMMENT ON TABLE sitemap_lastmod_clamp_counts IS
$$How many rows of each site and section have a lastmod clamp (sitemap_lastmod_clamps), kept by its triggers; a section with none has no row.$$;

CREATE FUNCTION sitemap_count_clamps(sites text[], sections text[], deltas bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO sitemap_lastmod_clamp_counts AS c (site, section, clamps)
    SELECT site, section, sum(n)
    FROM unnest(sites, sections, deltas) AS d(site, section, n)
    GROUP BY site, section
    ON CONFLICT (site, section) DO UPDATE SET clamps = c.clamps + excluded.clamps;
    DELETE FROM sitemap_lastmod_clamp_counts c
    USING unnest(sites, sections) AS d(site, section)
    WHERE c.site = d.site AND c.section = d.section AND c.clamps <= 0;
$$;
COMMENT ON FUNCTION sitemap_count_clamps(text[], text[], bigint[]) IS
$$Adds per-section deltas to sitemap_lastmod_clamp_counts, and drops the sections left with none.$$;

CREATE FUNCTION sitemap_lastmod_clamps_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM sitemap_count_clamps(array_agg(site), array_agg(section), array_agg(n))
        FROM (SELECT site, section, count(*) AS n FROM new_clamps GROUP BY 1, 2) d;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM sitemap_count_clamps(array_agg(site), array_agg(section), array_agg(-n))
        FROM (SELECT site, section, count(*) AS n FROM old_clamps GROUP BY 1, 2) d;
    ELSE
        PERFORM sitemap_count_clamps(array_agg(site), array_agg(section), array_agg(n))
        FROM (SELECT site, section, sum(n) AS n
              FROM (SELECT site, section, 1 AS n FROM new_clamps
                    UNION ALL
                    SELECT site, section, -1 FROM old_clamps) m
              GROUP BY 1, 2) d;
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_lastmod_clamps_counted() IS
$$After each statement that writes sitemap_lastmod_clamps: counts the clamps it added, dropped or moved to another section in sitemap_lastmod_clamp_counts.$$;

-- PostgreSQL allows transition tables on a trigger of one event only.
CREATE TRIGGER sitemap_lastmod_clamps_inserted AFTER INSERT ON sitemap_lastmod_clamps
    REFERENCING NEW TABLE AS new_clamps
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_lastmod_clamps_counted();
CREATE TRIGGER sitemap_lastmod_clamps_updated AFTER UPDATE ON sitemap_lastmod_clamps
    REFERENCING OLD TABLE AS old_clamps NEW TABLE AS new_clamps
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_lastmod_clamps_counted();
CREATE TRIGGER sitemap_lastmod_clamps_deleted AFTER DELETE ON sitemap_lastmod_clamps
    REFERENCING OLD TABLE AS old_clamps
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_lastmod_clamps_counted();

INSERT INTO sitemap_lastmod_clamp_counts (site, section, clamps)
SELECT site, section, count(*) FROM sitemap_lastmod_clamps GROUP BY site, section;
