-- URL audit: a site can have its listed URLs fetched from the live site
-- (or through an origin of the operator's), no redirect followed, and
-- what each answers kept: its status, a redirect's Location, noindex, a
-- canonical elsewhere. One row per URL, written by the service's auditor.

ALTER TABLE sitemap_sites
    ADD COLUMN audit boolean NOT NULL DEFAULT false,
    ADD COLUMN audit_origin text,
    ADD COLUMN audit_requests_per_second double precision NOT NULL DEFAULT 2,
    ADD COLUMN audit_user_agent text,
    ADD COLUMN audit_interval interval NOT NULL DEFAULT '30 days',
    ADD COLUMN audit_leave_out text[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT sitemap_sites_audit_origin_form
        CHECK (audit_origin ~ '^https?://[^/?#@[:space:]]+$' AND audit_origin = lower(audit_origin)),
    ADD CONSTRAINT sitemap_sites_audit_rate
        CHECK (audit_requests_per_second > 0 AND audit_requests_per_second <= 10000),
    ADD CONSTRAINT sitemap_sites_audit_user_agent_text
        CHECK (audit_user_agent ~ '^[ -~]+$' AND length(audit_user_agent) <= 256),
    ADD CONSTRAINT sitemap_sites_audit_interval_length
        CHECK (audit_interval >= interval '1 minute'),
    ADD CONSTRAINT sitemap_sites_audit_leave_out_findings
        CHECK (audit_leave_out <@ ARRAY['redirect', 'not-found', 'gone', 'noindex', 'canonical-elsewhere']);

COMMENT ON COLUMN sitemap_sites.audit IS
$$Whether the site's URLs are fetched from the live site and what they answer kept in sitemap_audits.$$;
COMMENT ON COLUMN sitemap_sites.audit_origin IS
$$scheme://host[:port] the audit fetches through instead of the site's origin (an internal address); null: the site's own.$$;
COMMENT ON COLUMN sitemap_sites.audit_requests_per_second IS
$$The most requests a second the audit sends the site.$$;
COMMENT ON COLUMN sitemap_sites.audit_user_agent IS
$$The User-Agent of the audit's requests; null: sitemapd-audit/VERSION.$$;
COMMENT ON COLUMN sitemap_sites.audit_interval IS
$$How long an unchanged URL's check holds before it is fetched again.$$;
COMMENT ON COLUMN sitemap_sites.audit_leave_out IS
$$Findings that leave a URL out of the sitemaps until a later check passes; empty: report only.$$;

CREATE TABLE sitemap_audits (
    id bigint PRIMARY KEY,
    site text NOT NULL,
    loc text NOT NULL,
    row_updated_at timestamptz NOT NULL,
    checked_at timestamptz NOT NULL,
    status integer,
    location text,
    noindex boolean NOT NULL,
    canonical text,
    finding text NOT NULL
        CHECK (finding IN ('ok', 'redirect', 'not-found', 'gone', 'noindex', 'canonical-elsewhere', 'error')),
    detail text
);
CREATE INDEX sitemap_audits_site_checked ON sitemap_audits (site, checked_at);
CREATE INDEX sitemap_audits_site_finding ON sitemap_audits (site, finding);

COMMENT ON TABLE sitemap_audits IS
$$The last check of each audited URL (id is the row's): the loc fetched and the row's updated_at then (a change of either has it checked again), when, the status, a redirect's Location, whether it said noindex, the canonical it named, and the finding: ok, redirect, not-found, gone, noindex, canonical-elsewhere, or error (any other status, or no answer within 10 s; detail says which). Written by the auditor alone.$$;

-- The rows of a site to check: never checked, changed since (another loc,
-- or updated_at later), or checked longer ago than the interval. The
-- first kind is walked in id order from p_after, so a pass over a large
-- site reads each row once, not once per batch.
CREATE FUNCTION sitemap_audit_due(p_site text, p_interval interval, p_limit integer, p_after bigint)
RETURNS TABLE (id bigint, loc text, updated_at timestamptz, in_pass boolean)
LANGUAGE sql STABLE AS $$
    (SELECT u.id, u.loc, u.updated_at, true
     FROM sitemap_urls u
     WHERE u.site = p_site AND u.id > p_after
       AND NOT EXISTS (SELECT 1 FROM sitemap_audits a
                       WHERE a.id = u.id AND a.loc = u.loc AND a.row_updated_at >= u.updated_at)
     ORDER BY u.id
     LIMIT p_limit)
    UNION ALL
    (SELECT u.id, u.loc, u.updated_at, false
     FROM sitemap_audits a JOIN sitemap_urls u ON u.id = a.id
     WHERE a.site = p_site AND a.checked_at < now() - p_interval
       AND a.loc = u.loc AND a.row_updated_at >= u.updated_at
     ORDER BY a.checked_at
     LIMIT p_limit)
$$;
COMMENT ON FUNCTION sitemap_audit_due(text, interval, integer, bigint) IS
$$Up to p_limit rows of the site past id p_after never checked or changed since their check, in id order (in_pass), then up to p_limit whose check is older than p_interval, oldest first.$$;

-- audit_leave_out: a URL whose current check (of its loc as it is now)
-- found one of the site's audit_leave_out is left out with the reason
-- 'audit: FINDING'. A check that changes that verdict takes the row off
-- its page (or out of the left-out) to be placed again; so does a change
-- of the site's audit or audit_leave_out, through this queue.
CREATE TABLE sitemap_audit_changes (
    site text PRIMARY KEY
);
COMMENT ON TABLE sitemap_audit_changes IS
$$Sites whose audit or audit_leave_out changed: the next fold places again the rows whose verdict the change turned (sitemap_apply_audit_changes).$$;

CREATE FUNCTION sitemap_sites_audit_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (OLD.audit, OLD.audit_leave_out) IS DISTINCT FROM (NEW.audit, NEW.audit_leave_out) THEN
        INSERT INTO sitemap_audit_changes (site) VALUES (NEW.site) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_sites_audit_changed() IS
$$Queues a site whose audit or audit_leave_out changed in sitemap_audit_changes.$$;
CREATE TRIGGER sitemap_sites_audit_changed AFTER UPDATE ON sitemap_sites
FOR EACH ROW EXECUTE FUNCTION sitemap_sites_audit_changed();

-- The finding that leaves a row out, if any: its site audits, leaves that
-- finding out, and the check is of the row's loc as it is.
CREATE FUNCTION sitemap_audit_leaves_out(p_site text, p_id bigint, p_loc text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT a.finding FROM sitemap_audits a JOIN sitemap_sites s ON s.site = a.site
    WHERE a.id = p_id AND a.site = p_site AND a.loc = p_loc
      AND s.audit AND a.finding = ANY (s.audit_leave_out)
$$;
COMMENT ON FUNCTION sitemap_audit_leaves_out(text, bigint, text) IS
$$The finding of the row's current check that its site's audit_leave_out names, or null.$$;

CREATE FUNCTION sitemap_apply_audit_changes() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    changed text[];
    turned bigint[];
BEGIN
    WITH taken AS (DELETE FROM sitemap_audit_changes RETURNING site)
    SELECT array_agg(site) INTO changed FROM taken;
    IF changed IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(p.id) INTO turned
    FROM sitemap_audits a
    JOIN sitemap_urls u ON u.id = a.id
    CROSS JOIN LATERAL sitemap_placement_of(a.id) p
    WHERE a.site = ANY (changed)
      AND (p.page IS NOT NULL) = (sitemap_audit_leaves_out(u.site, u.id, u.loc) IS NOT NULL)
      AND (p.page IS NOT NULL OR p.skip_reason LIKE 'audit: %');
    IF turned IS NOT NULL THEN
        PERFORM sitemap_unplace(turned);
    END IF;
END $$;
COMMENT ON FUNCTION sitemap_apply_audit_changes() IS
$$Part of a fold, under its lock: for the sites in sitemap_audit_changes, takes off their pages (or out of the left-out) the audited rows whose audit verdict the change turned, to be placed again.$$;

-- Each fold's sites that leave findings out, for the read of its rows.
CREATE FUNCTION sitemap_fold_audit_sites() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('pg_temp.sitemap_fold_audited') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_audited (site text PRIMARY KEY, leave_out text[] NOT NULL)
            ON COMMIT DELETE ROWS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM sitemap_sites s WHERE s.audit AND s.audit_leave_out <> '{}') THEN
        RETURN;
    END IF;
    INSERT INTO sitemap_fold_audited (site, leave_out)
    SELECT s.site, s.audit_leave_out
    FROM (SELECT DISTINCT f.site FROM sitemap_fold_rows f) f
    JOIN sitemap_sites s ON s.site = f.site
    WHERE s.audit AND s.audit_leave_out <> '{}';
END $$;
COMMENT ON FUNCTION sitemap_fold_audit_sites() IS
$$Part of a fold: writes to sitemap_fold_audited (a temporary table) the sites of the rows it read that leave audit findings out, with the findings.$$;
