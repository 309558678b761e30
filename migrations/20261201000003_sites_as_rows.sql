-- Sites are data: a site holds everything the configuration gave it, is
-- created, changed and removed while the service runs (the write API,
-- `sitemapd sites`, or plain SQL), and has tokens of its own. Every change
-- is announced on channel sitemapd_sites, so every replica takes it up at
-- once.

CREATE FUNCTION sitemap_origin_host(origin text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT substring(origin FROM '^[a-z][a-z0-9+.-]*://(\[[^]]*\]|[^:/]*)')
$$;
COMMENT ON FUNCTION sitemap_origin_host(text) IS
$$The host of an origin (scheme://host[:port]), without its port: what requests are routed by.$$;

ALTER TABLE sitemap_sites
    ADD COLUMN host text GENERATED ALWAYS AS (sitemap_origin_host(origin)) STORED,
    ADD COLUMN robots_txt text,
    ADD COLUMN include_subfolder_sites boolean NOT NULL DEFAULT false,
    ADD COLUMN indexnow_key text,
    ADD COLUMN index_format text NOT NULL DEFAULT 'xml',
    ADD COLUMN nested_index boolean NOT NULL DEFAULT false,
    ADD COLUMN created_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(),
    ADD CONSTRAINT sitemap_sites_site_slug
        CHECK (site ~ '^[a-z0-9][a-z0-9_-]*$' AND octet_length(site) <= 64),
    ADD CONSTRAINT sitemap_sites_origin_form
        CHECK (origin ~ '^https?://[^/?#@[:space:]]+$' AND origin = lower(origin)),
    ADD CONSTRAINT sitemap_sites_robots_txt_size
        CHECK (octet_length(robots_txt) <= 512000),
    ADD CONSTRAINT sitemap_sites_indexnow_key_rule
        CHECK (indexnow_key ~ '^[A-Za-z0-9-]{8,128}$'),
    ADD CONSTRAINT sitemap_sites_index_format_value
        CHECK (index_format IN ('xml', 'xml.gz'));

-- Sites dropped from a configuration file stayed in the table; two that
-- claim one host and path cannot both be served. The name that sorts
-- first stays; the file's sites are written again at the next start, and
-- one the file names wins its host and path back.
DELETE FROM sitemap_sites a USING sitemap_sites b
WHERE a.host = b.host AND a.path_prefix = b.path_prefix AND a.site > b.site;

CREATE UNIQUE INDEX sitemap_sites_host_path ON sitemap_sites (host, path_prefix);

COMMENT ON TABLE sitemap_sites IS
$$The sites the service serves, one row each, written by the write API (/api/v1/sites), `sitemapd sites`, plain SQL, or the configuration file at start (which wins for the sites it names). Every change is announced on channel sitemapd_sites and taken up by every replica at once. A loc must lie under its site's origin and path prefix to be served.$$;
COMMENT ON COLUMN sitemap_sites.site IS
$$The site's name, a slug (a-z, 0-9, _ and -, starting with a letter or digit, at most 64 bytes): what sitemap_urls.site refers to.$$;
COMMENT ON COLUMN sitemap_sites.origin IS
$$scheme://host[:port] of the base URL, lower case, default port left out.$$;
COMMENT ON COLUMN sitemap_sites.path_prefix IS
$$The base URL's path, starting and ending with /. origin || path_prefix is the base URL.$$;
COMMENT ON COLUMN sitemap_sites.host IS
$$The origin's host without port (generated). No two sites share host and path_prefix.$$;
COMMENT ON COLUMN sitemap_sites.robots_txt IS
$$The operator's robots.txt for the site's host, at most 512,000 bytes (what Google reads); null for none.$$;
COMMENT ON COLUMN sitemap_sites.include_subfolder_sites IS
$$Whether the site's index also lists the pages of the sites under its base URL, on its scheme and host.$$;
COMMENT ON COLUMN sitemap_sites.indexnow_key IS
$$The site's IndexNow key (8 to 128 of a-z A-Z 0-9 -), served at /{key}.txt; changes are pushed while it is set.$$;
COMMENT ON COLUMN sitemap_sites.index_format IS
$$'xml' or 'xml.gz': which name of the index robots.txt announces.$$;
COMMENT ON COLUMN sitemap_sites.nested_index IS
$$Whether an index split in several files is served as an index of them.$$;
COMMENT ON COLUMN sitemap_sites.updated_at IS
$$When the row last changed (set by sitemap_sites_before_update).$$;

-- Rows a site's new base URL no longer admits, or that were left out
-- (their site unknown, their loc outside it), go back to be placed. A fold
-- does it, holding the folds' lock: a site written beside a running fold
-- then never waits for it, and rows that fold left out are placed by the
-- next.
CREATE TABLE sitemap_site_changes (
    site text PRIMARY KEY
);
COMMENT ON TABLE sitemap_site_changes IS
$$Sites created, or whose base URL changed, since the last fold: the next fold places their rows again (sitemap_apply_site_changes).$$;

CREATE FUNCTION sitemap_sites_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END $$;
COMMENT ON FUNCTION sitemap_sites_before_update() IS
$$Stamps updated_at on every change of a site.$$;
CREATE TRIGGER sitemap_sites_before_update BEFORE UPDATE ON sitemap_sites
FOR EACH ROW WHEN ((OLD.site, OLD.origin, OLD.path_prefix, OLD.robots_txt, OLD.include_subfolder_sites,
                    OLD.indexnow_key, OLD.index_format, OLD.nested_index)
                   IS DISTINCT FROM
                   (NEW.site, NEW.origin, NEW.path_prefix, NEW.robots_txt, NEW.include_subfolder_sites,
                    NEW.indexnow_key, NEW.index_format, NEW.nested_index))
EXECUTE FUNCTION sitemap_sites_before_update();

CREATE FUNCTION sitemap_sites_after_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (OLD.origin, OLD.path_prefix) IS DISTINCT FROM (NEW.origin, NEW.path_prefix)) THEN
        INSERT INTO sitemap_site_changes (site) VALUES (NEW.site) ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.site <> NEW.site THEN
        INSERT INTO sitemap_site_changes (site) VALUES (NEW.site) ON CONFLICT DO NOTHING;
    END IF;
    PERFORM pg_notify('sitemapd_sites', concat_ws(' ', 'site',
        CASE WHEN TG_OP = 'DELETE' THEN OLD.site ELSE NEW.site END,
        CASE WHEN TG_OP = 'DELETE' THEN OLD.host ELSE NEW.host END,
        CASE WHEN TG_OP = 'UPDATE' THEN OLD.host END,
        CASE WHEN TG_OP = 'UPDATE' AND OLD.site <> NEW.site THEN OLD.site END));
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_sites_after_change() IS
$$Announces a created, changed or removed site on channel sitemapd_sites ('site NAME HOST [OLD_HOST [OLD_NAME]]'), and queues a new site, or one whose base URL changed, for the next fold to place its rows again.$$;
CREATE TRIGGER sitemap_sites_after_change AFTER INSERT OR UPDATE OR DELETE ON sitemap_sites
FOR EACH ROW EXECUTE FUNCTION sitemap_sites_after_change();

CREATE FUNCTION sitemap_apply_site_changes() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    changed text[];
BEGIN
    WITH taken AS (DELETE FROM sitemap_site_changes RETURNING site)
    SELECT array_agg(site) INTO changed FROM taken;
    IF changed IS NULL THEN
        RETURN;
    END IF;
    PERFORM sitemap_unplace(array_agg(p.id))
    FROM sitemap_placed p
    JOIN sitemap_urls u ON u.id = p.id
    LEFT JOIN sitemap_sites s ON s.site = p.site
    WHERE p.site = ANY (changed)
      AND (p.skip_reason IS NOT NULL OR s.site IS NULL
           OR NOT sitemap_loc_in_scope(u.loc, s.origin, s.path_prefix));
    -- Another base URL may list the news otherwise.
    UPDATE sitemap_news_state SET due = '-infinity';
END $$;
COMMENT ON FUNCTION sitemap_apply_site_changes() IS
$$Part of a fold, under its lock: takes off their pages, to be placed again, the rows of the sites in sitemap_site_changes that were left out or that their base URL no longer admits.$$;

-- The configuration's sites are rows like any other now; writing one is an
-- upsert, and its rows follow at the next fold.
DROP FUNCTION sitemap_configure_site(text, text, text);

CREATE TABLE sitemap_site_tokens (
    digest text PRIMARY KEY CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    site text NOT NULL REFERENCES sitemap_sites (site) ON DELETE CASCADE ON UPDATE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sitemap_site_tokens_site ON sitemap_site_tokens (site);
COMMENT ON TABLE sitemap_site_tokens IS
$$The write API's site tokens: each may read and write only its site's URLs, stats and HTML view details. Only the token's SHA-256 digest is kept (sha256: and 64 lower-case hex digits, as `sitemapd token` prints it). A deleted row, or its site's, revokes it on every replica at once.$$;

CREATE FUNCTION sitemap_site_tokens_after_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sitemapd_sites', 'token ' ||
        CASE WHEN TG_OP = 'DELETE' THEN OLD.digest ELSE NEW.digest END);
    IF TG_OP = 'UPDATE' AND OLD.digest <> NEW.digest THEN
        PERFORM pg_notify('sitemapd_sites', 'token ' || OLD.digest);
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION sitemap_site_tokens_after_change() IS
$$Announces a minted, moved or revoked site token on channel sitemapd_sites ('token DIGEST').$$;
CREATE TRIGGER sitemap_site_tokens_after_change AFTER INSERT OR UPDATE OR DELETE ON sitemap_site_tokens
FOR EACH ROW EXECUTE FUNCTION sitemap_site_tokens_after_change();
