-- The audit's findings are counted as they are written, per site and
-- finding: `/metrics`, `/api/v1/stats`, the operators' view and its
-- listing of a finding's URLs read the counts instead of counting
-- sitemap_audits. A site audited for weeks holds a check of every URL: at
-- 10M checks each scrape's count took half a second of both cores, and
-- about 40M would run past the scrape's 2 s. The auditor writes a few
-- hundred checks at a time, at the rate it fetches, so the triggers cost
-- it next to nothing. They fire in the writer's transaction: the counts
-- are exact at every commit.

CREATE TABLE sitemap_audit_finding_counts (
    site text NOT NULL,
    finding text NOT NULL,
    urls bigint NOT NULL,
    PRIMARY KEY (site, finding)
);
COMMENT ON TABLE sitemap_audit_finding_counts IS
$$How many audited URLs of each site have each finding (sitemap_audits), kept by its triggers; a finding with none has no row.$$;

CREATE FUNCTION sitemap_count_audit_findings(sites text[], findings text[], deltas bigint[]) RETURNS void
LANGUAGE sql AS $$
    -- In key order, so that two writers lock the counts they share in the
    -- same order.
    INSERT INTO sitemap_audit_finding_counts AS c (site, finding, urls)
    SELECT site, finding, sum(n)
    FROM unnest(sites, findings, deltas) AS d(site, finding, n)
    GROUP BY site, finding
    ORDER BY site, finding
    ON CONFLICT (site, finding) DO UPDATE SET urls = c.urls + excluded.urls;
    DELETE FROM sitemap_audit_finding_counts c
    USING unnest(sites, findings) AS d(site, finding)
    WHERE c.site = d.site AND c.finding = d.finding AND c.urls <= 0;
$$;
COMMENT ON FUNCTION sitemap_count_audit_findings(text[], text[], bigint[]) IS
$$Adds per-finding deltas to sitemap_audit_finding_counts, and drops the findings left with none.$$;

CREATE FUNCTION sitemap_audit_findings_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM sitemap_audit_finding_counts;
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM sitemap_count_audit_findings(array_agg(site), array_agg(finding), array_agg(n))
        FROM (SELECT site, finding, count(*) AS n FROM new_checks GROUP BY 1, 2) d;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM sitemap_count_audit_findings(array_agg(site), array_agg(finding), array_agg(-n))
        FROM (SELECT site, finding, count(*) AS n FROM old_checks GROUP BY 1, 2) d;
    ELSE
        PERFORM sitemap_count_audit_findings(array_agg(site), array_agg(finding), array_agg(n))
        FROM (SELECT site, finding, sum(n) AS n
              FROM (SELECT site, finding, 1 AS n FROM new_checks
                    UNION ALL
                    SELECT site, finding, -1 FROM old_checks) m
              GROUP BY 1, 2) d
        WHERE n <> 0;
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_audit_findings_counted() IS
$$After each statement that writes sitemap_audits: counts the checks it added, dropped or gave another finding or site in sitemap_audit_finding_counts.$$;

-- PostgreSQL allows transition tables on a trigger of one event only. An
-- upsert fires the INSERT trigger for the checks it inserted and the
-- UPDATE trigger for those it rewrote.
CREATE TRIGGER sitemap_audits_inserted AFTER INSERT ON sitemap_audits
    REFERENCING NEW TABLE AS new_checks
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_audit_findings_counted();
CREATE TRIGGER sitemap_audits_updated AFTER UPDATE ON sitemap_audits
    REFERENCING OLD TABLE AS old_checks NEW TABLE AS new_checks
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_audit_findings_counted();
CREATE TRIGGER sitemap_audits_deleted AFTER DELETE ON sitemap_audits
    REFERENCING OLD TABLE AS old_checks
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_audit_findings_counted();
CREATE TRIGGER sitemap_audits_truncated AFTER TRUNCATE ON sitemap_audits
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_audit_findings_counted();

LOCK TABLE sitemap_audits IN SHARE MODE;
INSERT INTO sitemap_audit_finding_counts (site, finding, urls)
SELECT site, finding, count(*) FROM sitemap_audits GROUP BY site, finding;
