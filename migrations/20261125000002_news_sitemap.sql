-- The news sitemap: each site's articles of the last 48 hours, newest
-- first, at most `per_file` (1,000) to a file.
--
-- Its files are versioned like pages: a summary per file whose lastmod moves
-- whenever what the file lists changes. Articles also leave when they age
-- out, with no write to say so; the service calls sitemap_refresh_news()
-- after its folds and whenever the next article is due to leave, and the
-- refresh compares each file's contents (a digest of its rows as listed)
-- with the last it saw.

-- When an article was first published, as stored (the CHECK admits only
-- W3C datetimes, whose zone or UTC date makes this deterministic).
CREATE FUNCTION sitemap_news_published(news jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT sitemap_w3c_datetime(news ->> 'publication_date')
$$;

-- A site's articles by publication, for the window.
CREATE INDEX sitemap_urls_news_idx ON sitemap_urls (site, sitemap_news_published(news))
    WHERE news IS NOT NULL;

-- The most bytes an article's entry takes in a news sitemap: a page entry's
-- reserve for its loc, and its news element as the writer writes it.
CREATE FUNCTION sitemap_news_entry_bytes(loc text, news jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT sitemap_entry_bytes(loc)
    + octet_length('<news:news><news:publication><news:name></news:name><news:language></news:language>'
                   '</news:publication><news:publication_date></news:publication_date>'
                   '<news:title></news:title></news:news>')
    + sitemap_text_bytes(news ->> 'publication_name') + sitemap_text_bytes(news ->> 'language')
    + sitemap_text_bytes(news ->> 'publication_date') + sitemap_text_bytes(news ->> 'title')
$$;

-- Each site with news records: the window its news files were last listed
-- for, and how many articles a file of it holds.
CREATE TABLE sitemap_news_windows (
    site text PRIMARY KEY,
    -- articles published after window_end - 48 hours are in the window
    window_end timestamptz NOT NULL,
    -- at most 1,000, max_urls, and as many of the window's largest entry
    -- as a page's byte budget holds: every file keeps both limits
    per_file integer NOT NULL CHECK (per_file >= 1)
);

-- One summary per news file.
CREATE TABLE sitemap_news_files (
    site text NOT NULL,
    file integer NOT NULL CHECK (file >= 1),
    url_count integer NOT NULL CHECK (url_count >= 0),
    -- when what the file lists last changed; strictly increasing per file
    lastmod timestamptz NOT NULL,
    -- md5 of its articles (id, updated_at) in order; '' for an empty file
    digest text NOT NULL,
    -- in the index: file 1 while its site has news records, even when the
    -- window is empty; any other file while it lists an article
    listed boolean NOT NULL,
    PRIMARY KEY (site, file)
);

CREATE TRIGGER sitemap_news_files_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sitemap_news_files
    FOR EACH STATEMENT EXECUTE FUNCTION sitemap_pages_notify();

-- When the news files must be listed again at the latest: the next article
-- leaves the window then ('infinity': none is in it).
CREATE TABLE sitemap_news_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    due timestamptz NOT NULL
);
INSERT INTO sitemap_news_state (due) VALUES ('-infinity');

-- A site's articles in the window ending at `window_end`, served ones only
-- (placed on a page, under the identity they were placed with), newest
-- first, numbered from 1.
CREATE FUNCTION sitemap_news_listing(p_site text, window_end timestamptz)
RETURNS TABLE (id bigint, n bigint, updated_at timestamptz, bytes integer)
LANGUAGE sql STABLE AS $$
SELECT u.id,
       row_number() OVER (ORDER BY sitemap_news_published(u.news) DESC, u.id DESC),
       u.updated_at, sitemap_news_entry_bytes(u.loc, u.news)
FROM sitemap_urls u
JOIN sitemap_placements p ON p.id = u.id AND p.page IS NOT NULL
                         AND p.site = u.site AND p.section = u.section
                         AND p.loc_hash = sitemap_loc_hash(u.loc)
WHERE u.site = p_site AND u.news IS NOT NULL
  AND sitemap_news_published(u.news) > window_end - interval '48 hours'
$$;

-- Lists every site's news files anew for the window ending at `window_end`
-- when `changed` (rows were folded) or an article is due to leave; a file
-- whose articles differ from the last listing gets a new lastmod.
CREATE FUNCTION sitemap_refresh_news(window_end timestamptz, changed boolean) RETURNS void
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    limits sitemap_settings%ROWTYPE;
BEGIN
    IF NOT changed AND (SELECT due FROM sitemap_news_state) > window_end THEN
        RETURN;
    END IF;
    SELECT * INTO limits FROM sitemap_settings;

    DELETE FROM sitemap_news_windows w
    WHERE NOT EXISTS (SELECT 1 FROM sitemap_urls u WHERE u.site = w.site AND u.news IS NOT NULL);
    INSERT INTO sitemap_news_windows AS w (site, window_end, per_file)
    SELECT s.site, sitemap_refresh_news.window_end,
           least(1000, limits.max_urls,
                 greatest(1, limits.entry_budget / coalesce(
                     (SELECT max(a.bytes) FROM sitemap_news_listing(s.site, sitemap_refresh_news.window_end) a),
                     1)))
    FROM sitemap_sites s
    WHERE EXISTS (SELECT 1 FROM sitemap_urls u WHERE u.site = s.site AND u.news IS NOT NULL)
    ON CONFLICT (site) DO UPDATE SET window_end = EXCLUDED.window_end, per_file = EXCLUDED.per_file;

    WITH files AS (
        SELECT w.site, ((a.n - 1) / w.per_file + 1)::integer AS file, count(*)::integer AS url_count,
               md5(string_agg(a.id || ' ' || a.updated_at, ',' ORDER BY a.n)) AS digest
        FROM sitemap_news_windows w, sitemap_news_listing(w.site, w.window_end) a
        GROUP BY 1, 2
    ), wanted AS (
        SELECT site, file, url_count, digest, true AS listed FROM files
        UNION ALL
        -- a site with news records always has file 1, empty or not
        SELECT w.site, 1, 0, '', true FROM sitemap_news_windows w
        WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.site = w.site)
        UNION ALL
        -- files no longer needed empty, and leave the index
        SELECT k.site, k.file, 0, '', false FROM sitemap_news_files k
        WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.site = k.site AND f.file = k.file)
          AND (k.file > 1 OR NOT EXISTS (SELECT 1 FROM sitemap_news_windows w WHERE w.site = k.site))
    )
    INSERT INTO sitemap_news_files AS k (site, file, url_count, lastmod, digest, listed)
    SELECT site, file, url_count, clock_timestamp(), digest, listed FROM wanted
    ON CONFLICT (site, file) DO UPDATE
    SET url_count = EXCLUDED.url_count, digest = EXCLUDED.digest, listed = EXCLUDED.listed,
        lastmod = greatest(clock_timestamp(), k.lastmod + interval '1 microsecond')
    WHERE (k.digest, k.listed) IS DISTINCT FROM (EXCLUDED.digest, EXCLUDED.listed);

    UPDATE sitemap_news_state SET due = coalesce(
        (SELECT min(sitemap_news_published(u.news)) + interval '48 hours' FROM sitemap_urls u
         WHERE u.news IS NOT NULL AND sitemap_news_published(u.news) > window_end - interval '48 hours'),
        'infinity');
END $$;
