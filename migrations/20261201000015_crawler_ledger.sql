-- The crawler ledger: who fetched which sitemap file, when, and which
-- version of it. One row per file and crawler, however many fetches; and
-- fetches per hour per crawler for 30 days. Written by the service alone,
-- in batches, with additive upserts, so replicas share one ledger.

CREATE TABLE sitemap_crawler_ledger (
    site text NOT NULL,
    file text NOT NULL,
    crawler text NOT NULL,
    verified boolean NOT NULL,
    first_fetch timestamptz NOT NULL,
    last_fetch timestamptz NOT NULL,
    last_status integer NOT NULL CHECK (last_status BETWEEN 100 AND 599),
    served_version timestamptz,
    fetches bigint NOT NULL CHECK (fetches >= 1),
    bytes bigint NOT NULL CHECK (bytes >= 0),
    PRIMARY KEY (site, file, crawler),
    CHECK (first_fetch <= last_fetch),
    CHECK (crawler ~ '^[a-z][a-z0-9-]*$' AND length(crawler) <= 32),
    CHECK (verified = (crawler NOT IN ('other', 'unverified')))
);

COMMENT ON TABLE sitemap_crawler_ledger IS
$$Each sitemap file (index files, pages, news) of a site as each crawler took it: the first and last fetch, the last status, the version the last fetch served (its lastmod: current while it equals the file's), fetches and bytes sent. crawler is a verified family (googlebot, bingbot, yandex, applebot, duckduckbot, baiduspider, petalbot, seznambot, yeti), unverified (a crawler's user agent from an address not verified as its own) or other. Written by the service alone.$$;

CREATE TABLE sitemap_crawler_hours (
    site text NOT NULL,
    crawler text NOT NULL,
    hour timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    fetches bigint NOT NULL CHECK (fetches >= 1),
    PRIMARY KEY (site, hour, crawler)
);

COMMENT ON TABLE sitemap_crawler_hours IS
$$Fetches of a site's sitemap files per hour and crawler, kept 30 days (pruned by the service), for the operators' plot.$$;

-- A batch of the ledger's records, as the service aggregated them, added to
-- what is there: counts and bytes add up, first and last fetch widen, and
-- the status and version are the latest fetch's.
CREATE FUNCTION sitemap_record_crawler_fetches(
    p_site text[], p_file text[], p_crawler text[], p_verified boolean[],
    p_first timestamptz[], p_last timestamptz[], p_status integer[],
    p_version timestamptz[], p_fetches bigint[], p_bytes bigint[]
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO sitemap_crawler_ledger AS l
        (site, file, crawler, verified, first_fetch, last_fetch, last_status, served_version,
         fetches, bytes)
    SELECT * FROM unnest(p_site, p_file, p_crawler, p_verified, p_first, p_last, p_status,
                         p_version, p_fetches, p_bytes)
    -- the same order for every writer, so two replicas never deadlock
    ORDER BY 1, 2, 3
    ON CONFLICT (site, file, crawler) DO UPDATE SET
        first_fetch = least(l.first_fetch, excluded.first_fetch),
        last_fetch = greatest(l.last_fetch, excluded.last_fetch),
        last_status = CASE WHEN excluded.last_fetch >= l.last_fetch
                           THEN excluded.last_status ELSE l.last_status END,
        served_version = CASE WHEN excluded.last_fetch >= l.last_fetch
                              THEN excluded.served_version ELSE l.served_version END,
        fetches = l.fetches + excluded.fetches,
        bytes = l.bytes + excluded.bytes
$$;

CREATE FUNCTION sitemap_record_crawler_hours(
    p_site text[], p_crawler text[], p_hour timestamptz[], p_fetches bigint[]
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO sitemap_crawler_hours AS h (site, crawler, hour, fetches)
    SELECT * FROM unnest(p_site, p_crawler, p_hour, p_fetches)
    ORDER BY 1, 3, 2
    ON CONFLICT (site, hour, crawler) DO UPDATE SET fetches = h.fetches + excluded.fetches
$$;
