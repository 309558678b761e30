-- robots.txt and the sitemaps agree: a fold judges every loc it places
-- against the robots text its host serves, for each agent the site checks,
-- and leaves out (or reports) those any of them may not fetch. The matching
-- is the service's (src/site/robots.rs); the schema keeps the settings,
-- the verdicts, and which sites must be judged again because what they are
-- judged by changed.

CREATE FUNCTION sitemap_check_robots_agents(agents text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT cardinality(agents) BETWEEN 1 AND 16
       AND NOT EXISTS (SELECT 1 FROM unnest(agents) a
                       WHERE a IS NULL OR a !~ '^(\*|[A-Za-z_-]{1,64})$')
$$;
COMMENT ON FUNCTION sitemap_check_robots_agents(text[]) IS
$$The CHECK of sitemap_sites.robots_check_agents: 1 to 16 user agents, each * or a product token of letters, - and _ (at most 64).$$;

ALTER TABLE sitemap_sites
    ADD COLUMN robots_check text NOT NULL DEFAULT 'leave-out',
    ADD COLUMN robots_check_agents text[] NOT NULL DEFAULT '{*,googlebot,bingbot}',
    ADD CONSTRAINT sitemap_sites_robots_check_value
        CHECK (robots_check IN ('leave-out', 'report', 'off')),
    ADD CONSTRAINT sitemap_sites_robots_check_agents_rule
        CHECK (sitemap_check_robots_agents(robots_check_agents)),
    -- Binary text cannot be served as robots.txt nor judged by; a text
    -- written before this rule is left to its next change.
    ADD CONSTRAINT sitemap_sites_robots_txt_text
        CHECK (robots_txt !~ '[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]') NOT VALID;

COMMENT ON COLUMN sitemap_sites.robots_check IS
$$What a loc its host's robots.txt disallows (for any of robots_check_agents) becomes: 'leave-out' (left out, reason robots-disallowed), 'report' (listed and reported), or 'off' (not checked).$$;
COMMENT ON COLUMN sitemap_sites.robots_check_agents IS
$$The user agents each loc is checked for, as robots.txt groups name them.$$;

ALTER TABLE sitemap_placements ADD COLUMN robots_rule text;
COMMENT ON COLUMN sitemap_placements.robots_rule IS
$$The robots.txt rule that disallows the row, as 'Disallow: PATTERN (User-agent: NAME)': on a row left out (skip_reason robots-disallowed), or placed alone on its page where the site reports such rows. Null for every other row.$$;
CREATE INDEX sitemap_placements_robots_rule ON sitemap_placements (site, section)
    WHERE robots_rule IS NOT NULL;

CREATE FUNCTION sitemap_host_robots_txt(p_host text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT robots_txt FROM sitemap_sites
    WHERE host = p_host AND robots_txt IS NOT NULL
    ORDER BY octet_length(path_prefix), site COLLATE "C" DESC
    LIMIT 1
$$;
COMMENT ON FUNCTION sitemap_host_robots_txt(text) IS
$$The robots.txt a host serves: that of its site with the shortest base path that has one (of two alike, the name that sorts last), as the service picks it.$$;

CREATE TABLE sitemap_robots_changes (
    site text PRIMARY KEY
);
COMMENT ON TABLE sitemap_robots_changes IS
$$Sites whose locs must be judged again: the robots.txt their host serves, or their robots_check or robots_check_agents, changed. The next fold judges their placed rows again and moves only those whose verdict changed.$$;

CREATE FUNCTION sitemap_sites_robots_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    hosts text[];
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (OLD.robots_check, OLD.robots_check_agents, OLD.site)
           IS DISTINCT FROM (NEW.robots_check, NEW.robots_check_agents, NEW.site) THEN
            INSERT INTO sitemap_robots_changes (site) VALUES (NEW.site) ON CONFLICT DO NOTHING;
        END IF;
        IF (OLD.robots_txt, OLD.host, OLD.path_prefix) IS DISTINCT FROM (NEW.robots_txt, NEW.host, NEW.path_prefix)
           AND (OLD.robots_txt IS NOT NULL OR NEW.robots_txt IS NOT NULL) THEN
            hosts := ARRAY[OLD.host, NEW.host];
        END IF;
    ELSIF TG_OP = 'INSERT' AND NEW.robots_txt IS NOT NULL THEN
        hosts := ARRAY[NEW.host];
    ELSIF TG_OP = 'DELETE' AND OLD.robots_txt IS NOT NULL THEN
        hosts := ARRAY[OLD.host];
    END IF;
    IF hosts IS NOT NULL THEN
        INSERT INTO sitemap_robots_changes (site)
        SELECT site FROM sitemap_sites WHERE host = ANY (hosts)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_sites_robots_changed() IS
$$Queues in sitemap_robots_changes the sites to judge again after a site's change: itself when its robots_check or agents changed; every site of its host (old and new) when the robots text the host serves may have.$$;
CREATE TRIGGER sitemap_sites_robots_changed AFTER INSERT OR UPDATE OR DELETE ON sitemap_sites
FOR EACH ROW EXECUTE FUNCTION sitemap_sites_robots_changed();

DROP TRIGGER sitemap_sites_before_update ON sitemap_sites;
CREATE TRIGGER sitemap_sites_before_update BEFORE UPDATE ON sitemap_sites
FOR EACH ROW WHEN ((OLD.site, OLD.origin, OLD.path_prefix, OLD.robots_txt, OLD.include_subfolder_sites,
                    OLD.indexnow_key, OLD.index_format, OLD.nested_index, OLD.robots_check,
                    OLD.robots_check_agents)
                   IS DISTINCT FROM
                   (NEW.site, NEW.origin, NEW.path_prefix, NEW.robots_txt, NEW.include_subfolder_sites,
                    NEW.indexnow_key, NEW.index_format, NEW.nested_index, NEW.robots_check,
                    NEW.robots_check_agents))
EXECUTE FUNCTION sitemap_sites_before_update();

-- Each fold's judged sites: those of its rows whose host serves a robots
-- text and that check their locs. The fold reads the locs of their rows
-- alone, joined with sitemap_fold_judged.
CREATE FUNCTION sitemap_fold_robots_sites()
RETURNS TABLE (site text, robots_check text, agents text[], robots_txt text)
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('pg_temp.sitemap_fold_judged') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_judged (site text PRIMARY KEY) ON COMMIT DELETE ROWS;
    END IF;
    -- Without a robots text anywhere, the fold's sites need not be found
    -- (a million rows' took 0.15 s).
    IF NOT EXISTS (SELECT 1 FROM sitemap_sites s WHERE s.robots_txt IS NOT NULL) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH judged AS (
        INSERT INTO sitemap_fold_judged
        SELECT s.site FROM (SELECT DISTINCT f.site FROM sitemap_fold_rows f) f
        JOIN sitemap_sites s ON s.site = f.site
        WHERE s.robots_check <> 'off' AND sitemap_host_robots_txt(s.host) IS NOT NULL
        RETURNING sitemap_fold_judged.site
    )
    SELECT s.site, s.robots_check, s.robots_check_agents, sitemap_host_robots_txt(s.host)
    FROM judged j JOIN sitemap_sites s ON s.site = j.site;
END $$;
COMMENT ON FUNCTION sitemap_fold_robots_sites() IS
$$Part of a fold: writes to sitemap_fold_judged (a temporary table) the sites of the rows it read whose locs are judged, and returns them with their check, agents and the robots text of their host.$$;

-- A site judged again: its placed rows (alone or in runs) and those left
-- out as disallowed, with their loc and verdict as it stands.
CREATE FUNCTION sitemap_robots_verdicts(p_site text)
RETURNS TABLE (id bigint, loc text, placed boolean, robots_rule text)
LANGUAGE sql STABLE AS $$
    SELECT u.id, u.loc, p.page IS NOT NULL, p.robots_rule
    FROM sitemap_placements p JOIN sitemap_urls u ON u.id = p.id
    WHERE p.site = p_site AND (p.page IS NOT NULL OR p.skip_reason = 'robots-disallowed')
    UNION ALL
    SELECT u.id, u.loc, true, NULL
    FROM sitemap_placement_runs r
    CROSS JOIN LATERAL unnest(r.ids) AS m(id)
    JOIN sitemap_urls u ON u.id = m.id
    WHERE r.site = p_site
$$;
COMMENT ON FUNCTION sitemap_robots_verdicts(text) IS
$$The rows of a site a robots.txt change may move: those placed (alone or in runs) and those left out as robots-disallowed, each with its loc, whether it is placed, and the rule that disallows it (sitemap_placements.robots_rule).$$;

CREATE FUNCTION sitemap_set_robots_rules(ids bigint[], rules text[]) RETURNS void
LANGUAGE sql AS $$
    SELECT sitemap_explode(ids);
    UPDATE sitemap_placements p SET robots_rule = v.rule
    FROM unnest(ids, rules) AS v(id, rule)
    WHERE p.id = v.id;
$$;
COMMENT ON FUNCTION sitemap_set_robots_rules(bigint[], text[]) IS
$$Sets the robots.txt rule of rows that stay where they are (placed, or left out as disallowed): those in runs are placed alone first, on the same page, so no page changes.$$;
