-- The schema the migrations build, as pg_dump prints it from a freshly
-- migrated database (owners, privileges and sqlx's own table left out).
-- Each table's, column's and function's purpose is its comment.
--
-- Generated: do not edit. `BLESS=1 cargo test --test api schema_sql`
-- writes it again; the test fails when the migrations and this file differ.
--
-- PostgreSQL database dump
--


--
-- Name: sitemap_apply_audit_changes(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_apply_audit_changes() RETURNS void
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_apply_audit_changes(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_apply_audit_changes() IS 'Part of a fold, under its lock: for the sites in sitemap_audit_changes, takes off their pages (or out of the left-out) the audited rows whose audit verdict the change turned, to be placed again.';


--
-- Name: sitemap_apply_deltas(text[], text[], integer[], bigint[], bigint[], bigint[], bigint[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_apply_deltas(sites text[], sections text[], pages integer[], counts bigint[], byte_counts bigint[], image_counts bigint[], video_counts bigint[], alternate_counts bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF sites IS NULL THEN
        RETURN;
    END IF;
    WITH d AS (
        SELECT site, section, page, sum(n) AS n, sum(b) AS b, sum(i) AS i, sum(v) AS v, sum(a) AS a
        FROM unnest(sites, sections, pages, counts, byte_counts, image_counts, video_counts, alternate_counts)
            AS d(site, section, page, n, b, i, v, a)
        GROUP BY site, section, page
    ), existing AS (
        UPDATE sitemap_pages p
        SET url_count = p.url_count + d.n,
            bytes = p.bytes + d.b,
            images = p.images + d.i,
            videos = p.videos + d.v,
            alternates = p.alternates + d.a,
            lastmod = greatest(clock_timestamp(), p.lastmod + interval '1 microsecond')
        FROM d
        WHERE p.site = d.site AND p.section = d.section AND p.page = d.page
        RETURNING p.site, p.section, p.page
    )
    INSERT INTO sitemap_pages (site, section, page, url_count, bytes, images, videos, alternates, lastmod)
    SELECT d.site, d.section, d.page, d.n, d.b, d.i, d.v, d.a, clock_timestamp()
    FROM d
    WHERE NOT EXISTS (SELECT 1 FROM existing e
                      WHERE e.site = d.site AND e.section = d.section AND e.page = d.page);
END $$;


--
-- Name: FUNCTION sitemap_apply_deltas(sites text[], sections text[], pages integer[], counts bigint[], byte_counts bigint[], image_counts bigint[], video_counts bigint[], alternate_counts bigint[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_apply_deltas(sites text[], sections text[], pages integer[], counts bigint[], byte_counts bigint[], image_counts bigint[], video_counts bigint[], alternate_counts bigint[]) IS 'Adds per-page deltas (URLs, bytes, extension entries) to the summaries in sitemap_pages, and moves each listed page''s lastmod forward; a zero delta is a change in place.';


--
-- Name: sitemap_apply_site_changes(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_apply_site_changes() RETURNS void
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_apply_site_changes(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_apply_site_changes() IS 'Part of a fold, under its lock: takes off their pages, to be placed again, the rows of the sites in sitemap_site_changes that were left out or that their base URL no longer admits.';


--
-- Name: sitemap_audit_due(text, interval, integer, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_audit_due(p_site text, p_interval interval, p_limit integer, p_after bigint) RETURNS TABLE(id bigint, loc text, updated_at timestamp with time zone, in_pass boolean)
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: FUNCTION sitemap_audit_due(p_site text, p_interval interval, p_limit integer, p_after bigint); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_audit_due(p_site text, p_interval interval, p_limit integer, p_after bigint) IS 'Up to p_limit rows of the site past id p_after never checked or changed since their check, in id order (in_pass), then up to p_limit whose check is older than p_interval, oldest first.';


--
-- Name: sitemap_audit_findings_counted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_audit_findings_counted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_audit_findings_counted(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_audit_findings_counted() IS 'After each statement that writes sitemap_audits: counts the checks it added, dropped or gave another finding or site in sitemap_audit_finding_counts.';


--
-- Name: sitemap_audit_leaves_out(text, bigint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_audit_leaves_out(p_site text, p_id bigint, p_loc text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT a.finding FROM sitemap_audits a JOIN sitemap_sites s ON s.site = a.site
    WHERE a.id = p_id AND a.site = p_site AND a.loc = p_loc
      AND s.audit AND a.finding = ANY (s.audit_leave_out)
$$;


--
-- Name: FUNCTION sitemap_audit_leaves_out(p_site text, p_id bigint, p_loc text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_audit_leaves_out(p_site text, p_id bigint, p_loc text) IS 'The finding of the row''s current check that its site''s audit_leave_out names, or null.';


--
-- Name: sitemap_check_boolean(text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_boolean(field text, value jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'boolean' THEN
        RETURN sitemap_refuse(field, coalesce(value #>> '{}', 'null'), 'true or false (served as yes / no)');
    END IF;
    RETURN true;
END $$;


--
-- Name: FUNCTION sitemap_check_boolean(field text, value jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_boolean(field text, value jsonb) IS 'Refuses a value that is not a JSON boolean (served as yes / no).';


--
-- Name: sitemap_check_datetime(text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_datetime(field text, value jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'string' OR sitemap_w3c_datetime(value #>> '{}') IS NULL THEN
        RETURN sitemap_refuse(field, coalesce(value #>> '{}', 'null'),
            'a date (YYYY-MM-DD) or a date and time with seconds and zone (YYYY-MM-DDThh:mm:ss[.s] with Z or ±hh:mm)');
    END IF;
    RETURN true;
END $$;


--
-- Name: FUNCTION sitemap_check_datetime(field text, value jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_datetime(field text, value jsonb) IS 'Refuses a value that is not a W3C datetime the extensions'' schemas accept (sitemap_w3c_datetime).';


--
-- Name: sitemap_check_hreflang(text[], text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_hreflang(hreflang text[], cluster text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
    code text;
BEGIN
    IF (hreflang IS NULL) <> (cluster IS NULL) THEN
        RETURN sitemap_refuse(CASE WHEN cluster IS NULL THEN 'hreflang_cluster' ELSE 'hreflang' END, '',
            'hreflang and hreflang_cluster are set together');
    END IF;
    IF cluster = '' OR char_length(cluster) > 256 THEN
        RETURN sitemap_refuse('hreflang_cluster', cluster, 'a name of 1 to 256 characters');
    END IF;
    IF cardinality(hreflang) = 0 THEN
        RETURN sitemap_refuse('hreflang', '{}', 'at least one language');
    END IF;
    FOREACH code IN ARRAY hreflang LOOP
        IF code IS NULL OR NOT (lower(code) = 'x-default'
            OR (lower(code) ~ '^[a-z]{2}(-[a-z]{2})?$'
                AND lower(left(code, 2)) = ANY (sitemap_iso_languages())
                AND (char_length(code) = 2 OR upper(right(code, 2)) = ANY (sitemap_iso_countries())))) THEN
            RETURN sitemap_refuse('hreflang', coalesce(code, 'null'),
                'an ISO 639-1 language, optionally with an ISO 3166-1 alpha-2 region (de, de-AT), or x-default');
        END IF;
    END LOOP;
    RETURN true;
END $_$;


--
-- Name: FUNCTION sitemap_check_hreflang(hreflang text[], cluster text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_hreflang(hreflang text[], cluster text) IS 'The CHECK of sitemap_urls.hreflang and hreflang_cluster: set together; a cluster name of 1 to 256 characters; each code an ISO 639-1 language, optionally with an ISO 3166-1 alpha-2 region, or x-default, matched case-insensitively as crawlers do.';


--
-- Name: sitemap_check_images(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_images(images jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    image jsonb;
    i integer := 0;
BEGIN
    IF jsonb_typeof(images) <> 'array' THEN
        RETURN sitemap_refuse('images', images::text, 'a JSON array of {"loc": URL}');
    END IF;
    IF jsonb_array_length(images) > 1000 THEN
        RETURN sitemap_refuse('images', jsonb_array_length(images) || ' images', 'at most 1,000 images per URL');
    END IF;
    FOR image IN SELECT jsonb_array_elements(images) LOOP
        PERFORM sitemap_check_keys(format('images[%s]', i), image, '{loc}', '{caption,geo_location,title,license}');
        IF NOT image ? 'loc' THEN
            RETURN sitemap_refuse(format('images[%s].loc', i), '', 'required');
        END IF;
        PERFORM sitemap_check_url(format('images[%s].loc', i), image -> 'loc');
        i := i + 1;
    END LOOP;
    RETURN true;
END $$;


--
-- Name: FUNCTION sitemap_check_images(images jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_images(images jsonb) IS 'The CHECK of sitemap_urls.images: an array of at most 1,000 objects, each with a loc URL and no other key.';


--
-- Name: sitemap_check_keys(text, jsonb, text[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_keys(field text, value jsonb, allowed text[], deprecated text[]) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
    key text;
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'object' THEN
        RETURN sitemap_refuse(field, coalesce(value::text, 'null'), 'a JSON object');
    END IF;
    FOR key IN SELECT jsonb_object_keys(value) LOOP
        IF key = ANY (deprecated) THEN
            RETURN sitemap_refuse(field || '.' || key, value ->> key,
                'deprecated by Google in 2022; sitemapd never serves it');
        ELSIF NOT key = ANY (allowed) THEN
            RETURN sitemap_refuse(field || '.' || key, value ->> key,
                'not a field of ' || regexp_replace(field, '\[\d+\]$', '') || ' (' || array_to_string(allowed, ', ') || ')');
        END IF;
    END LOOP;
    RETURN true;
END $_$;


--
-- Name: FUNCTION sitemap_check_keys(field text, value jsonb, allowed text[], deprecated text[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_keys(field text, value jsonb, allowed text[], deprecated text[]) IS 'Refuses keys of an object outside allowed; those Google deprecated in 2022 (deprecated) with that reason.';


--
-- Name: sitemap_check_news(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_news(news jsonb) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $_$
DECLARE
    published timestamptz;
BEGIN
    PERFORM sitemap_check_keys('news', news, '{publication_name,language,publication_date,title}', '{}');
    IF NOT news ? 'publication_name' THEN
        RETURN sitemap_refuse('news.publication_name', '', 'required');
    END IF;
    PERFORM sitemap_check_text('news.publication_name', news -> 'publication_name', 2048);
    IF NOT news ? 'language' THEN
        RETURN sitemap_refuse('news.language', '', 'required');
    END IF;
    IF jsonb_typeof(news -> 'language') <> 'string'
       OR NOT ((news ->> 'language') = ANY (sitemap_iso_languages())
               OR (news ->> 'language') ~ '^[a-z]{3}$'
               OR (news ->> 'language') IN ('zh-cn', 'zh-tw')) THEN
        RETURN sitemap_refuse('news.language', news ->> 'language',
            'an ISO 639 language code in lower case (en, de, …), or zh-cn / zh-tw');
    END IF;
    IF NOT news ? 'publication_date' THEN
        RETURN sitemap_refuse('news.publication_date', '', 'required');
    END IF;
    PERFORM sitemap_check_datetime('news.publication_date', news -> 'publication_date');
    published := sitemap_w3c_datetime(news ->> 'publication_date');
    IF published > now() + interval '5 minutes' THEN
        RETURN sitemap_refuse('news.publication_date', news ->> 'publication_date',
            'not in the future (the article''s first publication)');
    END IF;
    IF NOT news ? 'title' THEN
        RETURN sitemap_refuse('news.title', '', 'required');
    END IF;
    PERFORM sitemap_check_text('news.title', news -> 'title', 2048);
    RETURN true;
END $_$;


--
-- Name: FUNCTION sitemap_check_news(news jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_news(news jsonb) IS 'The CHECK of sitemap_urls.news: an object with publication_name, language (ISO 639, or zh-cn / zh-tw), publication_date (a W3C datetime, not in the future) and title, as Google''s news extension has them.';


--
-- Name: sitemap_check_robots_agents(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_robots_agents(agents text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $_$
    SELECT cardinality(agents) BETWEEN 1 AND 16
       AND NOT EXISTS (SELECT 1 FROM unnest(agents) a
                       WHERE a IS NULL OR a !~ '^(\*|[A-Za-z_-]{1,64})$')
$_$;


--
-- Name: FUNCTION sitemap_check_robots_agents(agents text[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_robots_agents(agents text[]) IS 'The CHECK of sitemap_sites.robots_check_agents: 1 to 16 user agents, each * or a product token of letters, - and _ (at most 64).';


--
-- Name: sitemap_check_text(text, jsonb, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_text(field text, value jsonb, max_chars integer) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'string' OR value #>> '{}' = '' THEN
        RETURN sitemap_refuse(field, coalesce(value #>> '{}', 'null'), 'a non-empty string');
    END IF;
    IF char_length(value #>> '{}') > max_chars THEN
        RETURN sitemap_refuse(field, value #>> '{}', format('at most %s characters', max_chars));
    END IF;
    IF (value #>> '{}') ~ '[\x01-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]' THEN
        RETURN sitemap_refuse(field, value #>> '{}', 'no control characters (XML cannot carry them)');
    END IF;
    RETURN true;
END $$;


--
-- Name: FUNCTION sitemap_check_text(field text, value jsonb, max_chars integer); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_text(field text, value jsonb, max_chars integer) IS 'Refuses a value that is not a non-empty string of at most max_chars characters without control characters (XML cannot carry them).';


--
-- Name: sitemap_check_url(text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_url(field text, value jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    url text;
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'string' THEN
        RETURN sitemap_refuse(field, coalesce(value::text, 'null'), 'an absolute http(s) URL');
    END IF;
    url := value #>> '{}';
    IF NOT (starts_with(url, 'http://') OR starts_with(url, 'https://'))
       OR substr(url, strpos(url, '//') + 2, 1) IN ('', '/', '?', '#') THEN
        RETURN sitemap_refuse(field, url, 'an absolute http(s) URL with a host');
    END IF;
    IF url ~ '[\x01-\x20\x7f]' THEN
        RETURN sitemap_refuse(field, url, 'a URL without whitespace or control characters');
    END IF;
    IF sitemap_served_chars(url) > 2048 THEN
        RETURN sitemap_refuse(field, url, 'at most 2048 characters as served (non-ASCII percent-encoded)');
    END IF;
    RETURN true;
END $$;


--
-- Name: FUNCTION sitemap_check_url(field text, value jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_url(field text, value jsonb) IS 'Refuses a value that is not an absolute http(s) URL with a host, without whitespace or control characters, at most 2,048 characters as served (the rule of <loc>).';


--
-- Name: sitemap_check_videos(text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_check_videos(loc text, videos jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
    video jsonb;
    f text;
    i integer := 0;
    n numeric;
    t integer;
    code text;
BEGIN
    IF jsonb_typeof(videos) <> 'array' THEN
        RETURN sitemap_refuse('videos', videos::text, 'a JSON array of video objects');
    END IF;
    FOR video IN SELECT jsonb_array_elements(videos) LOOP
        f := format('videos[%s]', i);
        PERFORM sitemap_check_keys(f, video,
            '{thumbnail_loc,title,description,content_loc,player_loc,duration,expiration_date,rating,view_count,publication_date,family_friendly,restriction,platform,requires_subscription,uploader,live,tags}',
            '{category,gallery_loc,price,tvshow,allow_embed,autoplay}');
        IF NOT video ? 'thumbnail_loc' THEN
            RETURN sitemap_refuse(f || '.thumbnail_loc', '', 'required');
        END IF;
        PERFORM sitemap_check_url(f || '.thumbnail_loc', video -> 'thumbnail_loc');
        IF NOT video ? 'title' THEN
            RETURN sitemap_refuse(f || '.title', '', 'required');
        END IF;
        PERFORM sitemap_check_text(f || '.title', video -> 'title', 2048);
        IF NOT video ? 'description' THEN
            RETURN sitemap_refuse(f || '.description', '', 'required');
        END IF;
        PERFORM sitemap_check_text(f || '.description', video -> 'description', 2048);
        IF NOT (video ? 'content_loc' OR video ? 'player_loc') THEN
            RETURN sitemap_refuse(f || '.content_loc', '', 'content_loc or player_loc is required');
        END IF;
        IF video ? 'content_loc' THEN
            PERFORM sitemap_check_url(f || '.content_loc', video -> 'content_loc');
            IF video ->> 'content_loc' = loc THEN
                RETURN sitemap_refuse(f || '.content_loc', loc, 'not the page''s own loc');
            END IF;
        END IF;
        IF video ? 'player_loc' THEN
            PERFORM sitemap_check_url(f || '.player_loc', video -> 'player_loc');
            IF video ->> 'player_loc' = loc THEN
                RETURN sitemap_refuse(f || '.player_loc', loc, 'not the page''s own loc');
            END IF;
        END IF;
        IF video ? 'duration' THEN
            n := CASE WHEN jsonb_typeof(video -> 'duration') = 'number' THEN (video ->> 'duration')::numeric END;
            IF n IS NULL OR n NOT BETWEEN 1 AND 28800 OR (video ->> 'duration') !~ '^[0-9]+$' THEN
                RETURN sitemap_refuse(f || '.duration', video ->> 'duration', 'whole seconds from 1 to 28800');
            END IF;
        END IF;
        IF video ? 'expiration_date' THEN
            PERFORM sitemap_check_datetime(f || '.expiration_date', video -> 'expiration_date');
        END IF;
        IF video ? 'rating' THEN
            n := CASE WHEN jsonb_typeof(video -> 'rating') = 'number' THEN (video ->> 'rating')::numeric END;
            IF n IS NULL OR n NOT BETWEEN 0 AND 5 THEN
                RETURN sitemap_refuse(f || '.rating', video ->> 'rating', 'a number from 0.0 to 5.0');
            END IF;
        END IF;
        IF video ? 'view_count' THEN
            n := CASE WHEN jsonb_typeof(video -> 'view_count') = 'number' THEN (video ->> 'view_count')::numeric END;
            IF n IS NULL OR (video ->> 'view_count') !~ '^[0-9]+$' OR n > 18446744073709551615 THEN
                RETURN sitemap_refuse(f || '.view_count', video ->> 'view_count', 'a whole number, 0 or more');
            END IF;
        END IF;
        IF video ? 'publication_date' THEN
            PERFORM sitemap_check_datetime(f || '.publication_date', video -> 'publication_date');
        END IF;
        IF video ? 'family_friendly' THEN
            PERFORM sitemap_check_boolean(f || '.family_friendly', video -> 'family_friendly');
        END IF;
        IF video ? 'requires_subscription' THEN
            PERFORM sitemap_check_boolean(f || '.requires_subscription', video -> 'requires_subscription');
        END IF;
        IF video ? 'live' THEN
            PERFORM sitemap_check_boolean(f || '.live', video -> 'live');
        END IF;
        IF video ? 'restriction' THEN
            PERFORM sitemap_check_keys(f || '.restriction', video -> 'restriction', '{relationship,countries}', '{}');
            IF (video #>> '{restriction,relationship}') IS DISTINCT FROM 'allow'
               AND (video #>> '{restriction,relationship}') IS DISTINCT FROM 'deny' THEN
                RETURN sitemap_refuse(f || '.restriction.relationship',
                    coalesce(video #>> '{restriction,relationship}', ''), 'allow or deny');
            END IF;
            IF jsonb_typeof(video #> '{restriction,countries}') IS DISTINCT FROM 'array' THEN
                RETURN sitemap_refuse(f || '.restriction.countries',
                    coalesce(video #>> '{restriction,countries}', ''), 'an array of ISO 3166-1 alpha-2 country codes');
            END IF;
            FOR code IN SELECT jsonb_array_elements(video #> '{restriction,countries}') #>> '{}' LOOP
                IF code IS NULL OR NOT code = ANY (sitemap_iso_countries()) THEN
                    RETURN sitemap_refuse(f || '.restriction.countries', coalesce(code, 'null'),
                        'an ISO 3166-1 alpha-2 country code in upper case (FR, US, …)');
                END IF;
            END LOOP;
        END IF;
        IF video ? 'platform' THEN
            PERFORM sitemap_check_keys(f || '.platform', video -> 'platform', '{relationship,platforms}', '{}');
            IF (video #>> '{platform,relationship}') IS DISTINCT FROM 'allow'
               AND (video #>> '{platform,relationship}') IS DISTINCT FROM 'deny' THEN
                RETURN sitemap_refuse(f || '.platform.relationship',
                    coalesce(video #>> '{platform,relationship}', ''), 'allow or deny');
            END IF;
            IF jsonb_typeof(video #> '{platform,platforms}') IS DISTINCT FROM 'array' THEN
                RETURN sitemap_refuse(f || '.platform.platforms',
                    coalesce(video #>> '{platform,platforms}', ''), 'an array of web, mobile, tv');
            END IF;
            FOR code IN SELECT jsonb_array_elements(video #> '{platform,platforms}') #>> '{}' LOOP
                IF code IS NULL OR code NOT IN ('web', 'mobile', 'tv') THEN
                    RETURN sitemap_refuse(f || '.platform.platforms', coalesce(code, 'null'), 'web, mobile or tv');
                END IF;
            END LOOP;
        END IF;
        IF video ? 'uploader' THEN
            PERFORM sitemap_check_keys(f || '.uploader', video -> 'uploader', '{name,info}', '{}');
            IF NOT (video -> 'uploader') ? 'name' THEN
                RETURN sitemap_refuse(f || '.uploader.name', '', 'required');
            END IF;
            PERFORM sitemap_check_text(f || '.uploader.name', video #> '{uploader,name}', 255);
            IF (video -> 'uploader') ? 'info' THEN
                PERFORM sitemap_check_url(f || '.uploader.info', video #> '{uploader,info}');
                IF lower(substring(video #>> '{uploader,info}' FROM '^[a-zA-Z]+://([^/?#:]*)'))
                   IS DISTINCT FROM lower(substring(loc FROM '^[a-zA-Z]+://([^/?#:]*)')) THEN
                    RETURN sitemap_refuse(f || '.uploader.info', video #>> '{uploader,info}',
                        'a URL on the loc''s host');
                END IF;
            END IF;
        END IF;
        IF video ? 'tags' THEN
            IF jsonb_typeof(video -> 'tags') <> 'array' THEN
                RETURN sitemap_refuse(f || '.tags', video ->> 'tags', 'an array of strings');
            END IF;
            IF jsonb_array_length(video -> 'tags') > 32 THEN
                RETURN sitemap_refuse(f || '.tags', jsonb_array_length(video -> 'tags') || ' tags', 'at most 32 tags');
            END IF;
            FOR t IN 0 .. jsonb_array_length(video -> 'tags') - 1 LOOP
                PERFORM sitemap_check_text(format('%s.tags[%s]', f, t), video -> 'tags' -> t, 256);
            END LOOP;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN true;
END $_$;


--
-- Name: FUNCTION sitemap_check_videos(loc text, videos jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_check_videos(loc text, videos jsonb) IS 'The CHECK of sitemap_urls.videos: an array of video objects with the keys, types and ranges of Google''s video extension (thumbnail_loc, title, description, and a content_loc or player_loc that is not the page''s own loc).';


--
-- Name: sitemap_configure_limits(integer, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_configure_limits(p_max_urls integer, p_entry_budget bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_configure_limits(p_max_urls integer, p_entry_budget bigint); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_configure_limits(p_max_urls integer, p_entry_budget bigint) IS 'Writes the page limits (max_urls, and the bytes entries may take on a page). Takes off the pages that no longer fit them their newest rows, just enough, for the next fold to place again. The service runs it under the lock of sitemap_fold_state, so it takes turns with folds.';


--
-- Name: sitemap_count_audit_findings(text[], text[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_count_audit_findings(sites text[], findings text[], deltas bigint[]) RETURNS void
    LANGUAGE sql
    AS $$
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


--
-- Name: FUNCTION sitemap_count_audit_findings(sites text[], findings text[], deltas bigint[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_count_audit_findings(sites text[], findings text[], deltas bigint[]) IS 'Adds per-finding deltas to sitemap_audit_finding_counts, and drops the findings left with none.';


--
-- Name: sitemap_count_clamps(text[], text[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_count_clamps(sites text[], sections text[], deltas bigint[]) RETURNS void
    LANGUAGE sql
    AS $$
    INSERT INTO sitemap_lastmod_clamp_counts AS c (site, section, clamps)
    SELECT site, section, sum(n)
    FROM unnest(sites, sections, deltas) AS d(site, section, n)
    GROUP BY site, section
    ON CONFLICT (site, section) DO UPDATE SET clamps = c.clamps + excluded.clamps;
    DELETE FROM sitemap_lastmod_clamp_counts c
    USING unnest(sites, sections) AS d(site, section)
    WHERE c.site = d.site AND c.section = d.section AND c.clamps <= 0;
$$;


--
-- Name: FUNCTION sitemap_count_clamps(sites text[], sections text[], deltas bigint[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_count_clamps(sites text[], sections text[], deltas bigint[]) IS 'Adds per-section deltas to sitemap_lastmod_clamp_counts, and drops the sections left with none.';


--
-- Name: sitemap_entry_bytes(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_entry_bytes(loc text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT 125 + octet_length(loc)
    + CASE WHEN octet_length(loc) = char_length(loc)
                AND strpos(loc, '&') = 0 AND strpos(loc, '<') = 0 AND strpos(loc, '>') = 0
                AND strpos(loc, '"') = 0 AND strpos(loc, '''') = 0
           THEN 0
           ELSE CASE WHEN octet_length(loc) = char_length(loc) THEN 0
                     ELSE 2 * octet_length(regexp_replace(loc, '[\x01-\x7f]', '', 'g')) END
                + 4 * (char_length(loc) - char_length(replace(loc, '&', '')))
                + 3 * (char_length(loc) - char_length(translate(loc, '<>', '')))
                + 5 * (char_length(loc) - char_length(translate(loc, '"''', '')))
      END
$$;


--
-- Name: FUNCTION sitemap_entry_bytes(loc text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_entry_bytes(loc text) IS 'The bytes a <url> entry with this loc may take with every optional element at its longest: what a page reserves for it. ASCII locs without an XML special character take the first branch.';


--
-- Name: sitemap_explode(bigint[], boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_explode(wanted bigint[], place_alone boolean DEFAULT true) RETURNS void
    LANGUAGE sql
    AS $$
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


--
-- Name: FUNCTION sitemap_explode(wanted bigint[], place_alone boolean); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_explode(wanted bigint[], place_alone boolean) IS 'Takes the rows wanted out of the runs they stand in; the rest of each run stays a run. With place_alone, each gets a placement of its own on the same page with the same reservation, and pages and summaries are unchanged; without, they are off their pages and the caller subtracts them from their summaries.';


--
-- Name: sitemap_fold_audit_sites(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_audit_sites() RETURNS void
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_fold_audit_sites(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_audit_sites() IS 'Part of a fold: writes to sitemap_fold_audited (a temporary table) the sites of the rows it read that leave audit findings out, with the findings.';


--
-- Name: sitemap_fold_begin(bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_begin(max_rows bigint DEFAULT NULL::bigint, removals_taken bigint DEFAULT NULL::bigint, OUT started boolean, OUT nothing_to_place boolean) RETURNS record
    LANGUAGE plpgsql
    SET jit TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
DECLARE
    previous pg_snapshot;
    current_snapshot pg_snapshot := pg_current_snapshot();
    seen timestamptz := clock_timestamp();
    -- the pass under way: its snapshot and the last row it read
    pass_snapshot pg_snapshot;
    after_xid xid8;
    after_id bigint;
    span record;
    batch_room bigint;
    -- removals this fold takes, and whether it may leave some (see above)
    removals bigint;
    more_removals boolean;
    -- the ids they span, when they are many
    lowest_removed bigint;
    highest_removed bigint;
    -- the newest row placed once this fold's removals are applied
    newest_placed bigint;
    -- the newest row placed when the pass began: no row the pass reads was
    -- placed since (see above)
    pass_placed_through bigint;
    -- the transactions lanes folded since the pass's snapshot, through
    -- this one
    lane_through pg_snapshot;
    lane_rows bigint;
    lane boolean := false;
    pass_done boolean;
    -- how many rows read may have a placement, and whether any names a
    -- cluster: a batch of new plain rows (a bulk load) skips the steps for
    -- those
    placed_read bigint;
    any_cluster boolean;
    -- the rows in sitemap_fold_rows when they are counted with those: only
    -- the growth below (the rows of a cluster whose links changed) adds
    -- any after that
    rows_read bigint;
    -- the transactions the rows read were changed by, first and last, and
    -- the last row read of the last
    first_xid_read xid8;
    last_xid_read xid8;
    last_id_read bigint;
    later_lastmods boolean;
    -- the ids the rows read that may have a placement span
    lowest_placed_read bigint;
    highest_placed_read bigint;
    -- the changed rows found in runs, by fate (see above)
    changed_in_runs bigint := 0;
    moved_in_runs bigint := 0;
    kept_in_runs bigint := 0;
    -- its feed entries go to the stash (see above)
    stashing boolean := EXISTS (SELECT 1 FROM sitemap_change_stash);
    -- the caller's enable_sort, restored after the statements that hash
    sorting text := current_setting('enable_sort');
BEGIN
    IF current_setting('transaction_isolation') <> 'repeatable read' THEN
        RAISE EXCEPTION 'sitemap_fold_begin() needs a REPEATABLE READ transaction';
    END IF;
    IF max_rows < 1 THEN
        RAISE EXCEPTION 'sitemap_fold_begin(): max_rows must be at least 1, not %', max_rows;
    END IF;
    SELECT s.folded_through, s.folding_through, s.read_through_xid, s.read_through_id,
           s.lane_through, s.pass_placed_through
    INTO previous, pass_snapshot, after_xid, after_id, lane_through, pass_placed_through
    FROM sitemap_fold_state s FOR UPDATE;
    started := pass_snapshot IS NULL;
    IF started THEN
        pass_snapshot := current_snapshot;
        after_xid := '0';
        after_id := 0;
    END IF;
    IF pg_snapshot_xmax(coalesce(lane_through, pass_snapshot)) > pg_snapshot_xmax(current_snapshot) THEN
        RAISE EXCEPTION 'sitemap_fold_begin(): the last fold saw more than this one'
            USING ERRCODE = 'serialization_failure',
                  HINT = 'lock sitemap_fold_state before the transaction''s first query';
    END IF;

    PERFORM sitemap_fold_working_tables();
    IF EXISTS (SELECT 1 FROM sitemap_fold_pass) THEN
        RAISE EXCEPTION 'sitemap_fold_begin(): a fold began in this transaction already; one fold a transaction';
    END IF;

    -- This fold's removals: those the service took (see above), or all of
    -- them, or at most max_rows.
    IF removals_taken IS NOT NULL THEN
        removals := removals_taken;
    ELSIF max_rows IS NULL THEN
        WITH taken AS (
            DELETE FROM sitemap_removals RETURNING id, site, loc
        )
        INSERT INTO sitemap_fold_removals SELECT id, site, loc FROM taken;
        GET DIAGNOSTICS removals = ROW_COUNT;
    ELSE
        -- by their tuple ids: a bounded take without an index, which would
        -- cost every deleting writer an insert per row
        WITH taken AS (
            DELETE FROM sitemap_removals
            WHERE ctid = ANY (ARRAY(SELECT ctid FROM sitemap_removals LIMIT max_rows))
            RETURNING id, site, loc
        )
        INSERT INTO sitemap_fold_removals SELECT id, site, loc FROM taken;
        GET DIAGNOSTICS removals = ROW_COUNT;
    END IF;
    more_removals := coalesce(removals >= max_rows, false);
    -- many removals keep their entries, as many rows read do (below)
    stashing := stashing OR removals >= 10000;
    UPDATE sitemap_fold_state SET removals_left = more_removals;
    IF removals > 10000 AND removals_taken IS NULL THEN
        ANALYZE sitemap_fold_removals;
        SELECT min(id), max(id) INTO lowest_removed, highest_removed FROM sitemap_fold_removals;
    END IF;
    batch_room := max_rows - removals;

    -- A truncation took every row: every page empties, and what was
    -- written after it is placed below like any new row. Removals taken
    -- with it find nothing placed.
    IF EXISTS (SELECT 1 FROM sitemap_fold_removals WHERE id IS NULL) THEN
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
    -- them here, their runs found once: a run they all leave goes whole,
    -- and only the runs they leave partly are taken apart and written
    -- again without them. The statement after it takes the ones placed
    -- alone. Removals the service took it has applied to the runs itself.
    -- Few removals find their runs by id, one probe each; many read the
    -- runs over their ids once and join them to the removals, one hash of
    -- them (not two, as sitemap_run_members and a join with its result
    -- make). Their feed entries and page deltas come from the same
    -- statement, not noted on the way.
    -- A URL renamed away twice has two removals: one is kept, as a sort
    -- of the batch costs less than inserting it with ON CONFLICT.
    IF removals_taken IS NULL THEN
        WITH gone AS MATERIALIZED (
            SELECT DISTINCT ON (h.id) h.run, h.id, h.site, h.section, h.page, h.bytes, r.loc
            FROM (SELECT m.run, m.id, m.site, m.section, m.page, m.loc_hash, m.bytes
                  FROM sitemap_run_members(ARRAY(SELECT id FROM sitemap_fold_removals WHERE id IS NOT NULL)) m
                  WHERE removals <= 10000
                  UNION ALL
                  SELECT k.run, m.id, k.site, k.section, k.page, m.loc_hash, m.bytes
                  FROM sitemap_placement_runs k
                  CROSS JOIN LATERAL unnest(k.ids, k.loc_hashes, k.bytes) AS m(id, loc_hash, bytes)
                  WHERE removals > 10000
                    AND k.last_id >= lowest_removed AND k.first_id <= highest_removed) h
            JOIN sitemap_fold_removals r ON r.id = h.id AND r.site = h.site AND sitemap_loc_hash(r.loc) = h.loc_hash
            ORDER BY h.id
        ), leaving AS (
            SELECT run, count(*) AS members FROM gone GROUP BY run
        ), taken AS (
            DELETE FROM sitemap_placement_runs r USING leaving l
            WHERE r.run = l.run
            RETURNING r.run, r.site, r.section, r.page, r.ids, r.loc_hashes, r.bytes,
                      cardinality(r.ids) > l.members AS partly
        ), rewritten AS (
            INSERT INTO sitemap_placement_runs (site, section, page, first_id, last_id, ids, loc_hashes, bytes)
            SELECT t.site, t.section, t.page, min(m.id), max(m.id),
                   array_agg(m.id ORDER BY m.id), array_agg(m.loc_hash ORDER BY m.id), array_agg(m.bytes ORDER BY m.id)
            FROM taken t
            CROSS JOIN LATERAL unnest(t.ids, t.loc_hashes, t.bytes) AS m(id, loc_hash, bytes)
            WHERE t.partly AND NOT EXISTS (SELECT 1 FROM gone g WHERE g.id = m.id)
            GROUP BY t.run, t.site, t.section, t.page
        ), announced AS (
            INSERT INTO sitemap_changes (site, loc, change, committed_at)
            SELECT site, loc, 'removed', seen FROM gone WHERE NOT stashing
        ), per_page AS MATERIALIZED (
            SELECT site, section, page, count(*) AS n, sum(bytes) AS bytes FROM gone GROUP BY site, section, page
        ), kept AS (
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT site, 'removed', seen, array_agg(loc)
            FROM gone
            WHERE stashing
            GROUP BY site,
                     CASE WHEN site = ANY (ARRAY(SELECT site FROM per_page GROUP BY site HAVING sum(n) > 10000))
                          THEN id / 10000 END
            ORDER BY min(id)
        )
        INSERT INTO sitemap_fold_page_deltas
        SELECT site, section, page, -n, -bytes, 0, 0, 0, n, false FROM per_page;
    END IF;
    WITH taken AS (
        SELECT id, site, loc FROM sitemap_fold_removals WHERE id IS NOT NULL
    ), dropped AS (
        DELETE FROM sitemap_placements p USING taken t
        WHERE p.id = t.id AND p.site = t.site AND p.loc_hash = sitemap_loc_hash(t.loc)
        RETURNING p.id, p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates, p.cluster, t.loc
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM dropped WHERE page IS NOT NULL AND NOT stashing
    ), kept AS (
        INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
        SELECT e.site, 'removed', seen, array_agg(e.loc)
        FROM dropped e
        JOIN (SELECT site, count(*) > 10000 AS many FROM dropped WHERE page IS NOT NULL GROUP BY site) c
            ON c.site = e.site
        WHERE e.page IS NOT NULL AND stashing
        GROUP BY e.site, CASE WHEN c.many THEN e.id / 10000 END ORDER BY min(e.id)
    ), clusters AS (
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT DISTINCT cluster FROM dropped WHERE cluster IS NOT NULL
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), -sum(images), -sum(videos), -sum(alternates), count(*), false
    FROM dropped WHERE page IS NOT NULL GROUP BY site, section, page;

    -- Looked up after the removals: a row they took off its page has no
    -- placement now, and a pass that begins after a rename of every row
    -- reads none that may have one (each skips the steps below for those).
    newest_placed := greatest((SELECT max(id) FROM sitemap_placements),
                              (SELECT max(last_id) FROM sitemap_placement_runs));
    IF started THEN
        pass_placed_through := coalesce(newest_placed, 0);
    END IF;

    -- The pass's rows, on from where the last batch stopped: rows changed
    -- by transactions the last pass did not see (those that began after
    -- it, and those it saw still running) that this pass's snapshot sees.
    -- Then, in what room is left, rows a configuration change took off
    -- their page.
    -- A lane first: while a pass reads a bulk load, the few rows it would
    -- read after the transaction it is in, and those committed since its
    -- snapshot (up to 10,000), are folded on their own, by a fold that
    -- reads nothing else, so they wait for one batch of the pass at most,
    -- not for all of it. More than that waits for the pass.
    -- While removals are left, a fold reads nothing and begins no pass.
    IF more_removals THEN
        started := false;
        pass_done := false;
    ELSIF NOT started THEN
        SELECT count(*) INTO lane_rows
        FROM (SELECT 1
              FROM sitemap_fold_lane_ranges(previous, pass_snapshot, after_xid, lane_through,
                                            current_snapshot) r,
                   LATERAL (SELECT 1 FROM sitemap_urls u
                            WHERE u.change_xid >= r.low AND u.change_xid <= r.high
                            LIMIT 10001) x
              LIMIT 10001) c;
        lane := lane_rows BETWEEN 1 AND 10000;
    END IF;
    IF more_removals THEN
        NULL;
    ELSIF lane THEN
        FOR span IN SELECT * FROM sitemap_fold_lane_ranges(previous, pass_snapshot, after_xid,
                                                           lane_through, current_snapshot) LOOP
            PERFORM sitemap_fold_read(span.low, span.high, '0', 0, NULL, coalesce(newest_placed, 0));
        END LOOP;
        batch_room := 0;
        pass_done := false;
    ELSE
        FOR span IN SELECT * FROM sitemap_fold_ranges(previous, pass_snapshot) LOOP
            CONTINUE WHEN span.high < after_xid;
            -- past a lane, the pass reads on only in the transaction it was in
            EXIT WHEN batch_room = 0 OR (lane_through IS NOT NULL AND span.low > after_xid);
            batch_room := batch_room - sitemap_fold_read(greatest(span.low, after_xid),
                                                         CASE WHEN lane_through IS NULL THEN span.high
                                                              ELSE least(span.high, after_xid) END,
                                                         after_xid, after_id, batch_room,
                                                         coalesce(pass_placed_through, newest_placed, 0));
        END LOOP;
        pass_done := batch_room IS NULL OR batch_room > 0;
    END IF;
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
    -- Rows read as changed have a change_xid and a lastmod; those placed
    -- again have neither, and so have the rows added after this count.
    SELECT count(*), count(*) FILTER (WHERE may_be_placed), coalesce(bool_or(cluster IS NOT NULL), false),
           min(id) FILTER (WHERE may_be_placed), max(id) FILTER (WHERE may_be_placed),
           min(change_xid), max(change_xid), max(id) FILTER (WHERE change_xid IS NOT NULL),
           coalesce(bool_or(lastmod > now()), false)
    INTO rows_read, placed_read, any_cluster, lowest_placed_read, highest_placed_read,
         first_xid_read, last_xid_read, last_id_read, later_lastmods
    FROM sitemap_fold_rows;
    IF placed_read > 0 THEN
        -- Changed rows that stand in a run: one whose entry is as the run
        -- placed it (the same site, section and loc, still plain: an update of
        -- lastmod, say) stays there, and only its page's lastmod moves (below);
        -- the others are placed one by one from here on, so every step below
        -- finds them where it always did.
        -- One that is another URL now leaves its run and its page, to be placed
        -- again below.
        DELETE FROM sitemap_fold_in_runs;
        -- Few are looked up by id; many read the runs over their ids once,
        -- joined with the rows read themselves: through sitemap_run_members,
        -- their ids went into an array, out of it into a hash, and its
        -- result into another (about 150 of 400 ms for 150,000 rows).
        -- Their fates are found, counted by page and announced in one
        -- statement. A kept row is written to sitemap_fold_in_runs only
        -- when sitemap_fold_unplaced will be read, which leaves out the rows
        -- kept: when every row read is kept and no cluster changed, the
        -- service does not read it (nothing_to_place, below). Writing
        -- 200,000 kept rows there with their locs, then counting them and
        -- reading them back for their entries, took about 0.35 s of the
        -- 1.1 s a fold of them took.
        -- Counted by hashing: the pages are few, and sorting every row by
        -- its page took 70 of the 100 ms this took for 150,000 kept rows.
        -- The sites with more than 10,000 rows kept have their entries kept
        -- by blocks of ids (see above).
        PERFORM set_config('enable_sort', 'off', true);
        WITH fates AS MATERIALIZED (
            SELECT f.id, h.site, h.section, h.page, h.bytes, f.loc,
                   CASE WHEN (f.site, f.section, sitemap_loc_hash(f.loc)) IS DISTINCT FROM (h.site, h.section, h.loc_hash)
                            THEN 'moved'
                        WHEN f.own_bytes = h.bytes AND f.images = 0 AND f.videos = 0 AND f.cluster IS NULL
                            THEN 'kept'
                        ELSE 'changed'
                   END AS fate
            FROM (SELECT m.id, m.site, m.section, m.page, m.loc_hash, m.bytes
                  FROM sitemap_run_members(ARRAY(SELECT id FROM sitemap_fold_rows WHERE may_be_placed)) m
                  WHERE placed_read <= 10000
                  UNION ALL
                  SELECT m.id, k.site, k.section, k.page, m.loc_hash, m.bytes
                  FROM sitemap_placement_runs k
                  CROSS JOIN LATERAL unnest(k.ids, k.loc_hashes, k.bytes) AS m(id, loc_hash, bytes)
                  WHERE placed_read > 10000
                    AND k.last_id >= lowest_placed_read AND k.first_id <= highest_placed_read) h
            JOIN sitemap_fold_rows f ON f.id = h.id AND f.may_be_placed
        ), per_page AS MATERIALIZED (
            SELECT site, section, page, count(*) FILTER (WHERE fate = 'changed') AS changed,
                   count(*) FILTER (WHERE fate = 'moved') AS moved, count(*) FILTER (WHERE fate = 'kept') AS kept
            FROM fates GROUP BY site, section, page
        ), noted AS (
            INSERT INTO sitemap_fold_in_runs (id, site, section, page, bytes, loc, fate)
            SELECT id, site, section, page, bytes, loc, fate FROM fates
            WHERE fate <> 'kept'
               OR (SELECT sum(kept) FROM per_page) < rows_read
               OR EXISTS (SELECT 1 FROM sitemap_fold_clusters)
        ), kept_pages AS (
            INSERT INTO sitemap_fold_page_deltas
            SELECT site, section, page, 0, 0, 0, 0, 0, kept, false FROM per_page WHERE kept > 0
        ), announced AS (
            INSERT INTO sitemap_changes (site, loc, change, committed_at)
            SELECT site, loc, 'updated', seen FROM fates WHERE fate = 'kept' AND NOT stashing
        ), kept AS (
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT site, 'updated', seen, array_agg(loc)
            FROM fates
            WHERE fate = 'kept' AND stashing
            GROUP BY site,
                     CASE WHEN site = ANY (ARRAY(SELECT site FROM per_page GROUP BY site HAVING sum(kept) > 10000))
                          THEN id / 10000 END
            ORDER BY min(id)
        )
        SELECT coalesce(sum(changed), 0), coalesce(sum(moved), 0), coalesce(sum(kept), 0)
        INTO changed_in_runs, moved_in_runs, kept_in_runs
        FROM per_page;
        PERFORM set_config('enable_sort', sorting, true);
        IF changed_in_runs > 0 THEN
            PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs WHERE fate = 'changed'));
        END IF;
        IF moved_in_runs > 0 THEN
            PERFORM sitemap_explode(ARRAY(SELECT id FROM sitemap_fold_in_runs WHERE fate = 'moved'), false);
            INSERT INTO sitemap_fold_page_deltas
            SELECT site, section, page, -count(*), -sum(bytes), 0, 0, 0, 0, false
            FROM sitemap_fold_in_runs WHERE fate = 'moved' GROUP BY site, section, page;
        END IF;

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
    END IF;

    -- Clusters the changed rows name now or were folded with. A row of a
    -- cluster is placed alone, never in a run, so without a placement
    -- naming a cluster, only the rows' own can be.
    IF any_cluster OR (placed_read > 0 AND EXISTS (SELECT 1 FROM sitemap_placements WHERE cluster IS NOT NULL)) THEN
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT f.cluster FROM sitemap_fold_rows f WHERE f.cluster IS NOT NULL
        UNION
        SELECT p.cluster FROM sitemap_fold_rows f JOIN sitemap_placements p ON p.id = f.id AND f.may_be_placed
        WHERE p.cluster IS NOT NULL
        ON CONFLICT DO NOTHING;
    END IF;
    IF EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN
        PERFORM sitemap_rebuild_clusters();
    END IF;

    -- Rows still on their page whose entry changed: their own row, or the
    -- links of their cluster. Each takes its new size where it is, unless
    -- its page cannot hold what the growth adds: then the rows that grew
    -- leave it and are placed again, at the end of their section.
    IF placed_read > 0 OR EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN
        -- Each once, before the rows are joined: grouping them after, the
        -- join sorted every row with its loc and media. A row read is
        -- sized as read; only the members of a changed cluster that were
        -- not read are read and sized here.
        WITH candidates AS (
            SELECT id, bool_or(announced) AS announced
            FROM (SELECT f.id, NOT f.replaced AS announced FROM sitemap_fold_rows f WHERE f.may_be_placed
                  UNION ALL
                  SELECT p.id, true FROM sitemap_fold_clusters c JOIN sitemap_placements p ON p.cluster = c.cluster
                  WHERE c.changed AND p.page IS NOT NULL) c
            GROUP BY id
        ), entries AS (
            SELECT c.id, c.announced, f.loc, f.cluster, f.own_bytes, f.images, f.videos
            FROM candidates c JOIN sitemap_fold_rows f ON f.id = c.id AND f.may_be_placed
            UNION ALL
            SELECT c.id, c.announced, u.loc, u.hreflang_cluster,
                   sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos),
                   coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0)
            FROM candidates c JOIN sitemap_urls u ON u.id = c.id
            WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_rows f WHERE f.id = c.id AND f.may_be_placed)
        ), sized AS MATERIALIZED (
            SELECT p.id, p.site, p.section, p.page, e.loc, e.announced,
                   p.bytes AS old_bytes, p.images AS old_images, p.videos AS old_videos,
                   p.alternates AS old_alternates, e.cluster,
                   e.own_bytes + coalesce(k.link_bytes, 0) AS bytes,
                   e.images, e.videos,
                   coalesce(cardinality(k.hrefs), 0) AS alternates
            FROM entries e
            JOIN sitemap_placements p ON p.id = e.id AND p.page IS NOT NULL
            LEFT JOIN sitemap_clusters k ON k.cluster = e.cluster AND k.problem IS NULL
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
              -- most keep their sizes (a new lastmod): those stay as they are
              AND (p.bytes, p.images, p.videos, p.alternates, p.cluster)
                  IS DISTINCT FROM (s.bytes, s.images, s.videos, s.alternates, s.cluster)
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
            SELECT e.site, 'updated', seen, array_agg(e.loc)
            FROM sized e
            JOIN (SELECT site, count(*) > 10000 AS many FROM sized WHERE announced GROUP BY site) c
                ON c.site = e.site
            WHERE e.announced AND stashing
            GROUP BY e.site, CASE WHEN c.many THEN e.id / 10000 END ORDER BY min(e.id)
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
    END IF;
    -- Applied now: the placing below must see what the growth took.
    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE applied;

    -- Every row read stays as its run placed it, or none was read: there
    -- is nothing to place, and the service does not read
    -- sitemap_fold_unplaced (the rows kept were not noted for it; its
    -- anti-join of every row read with those kept took about 100 ms of a
    -- fold of 125,000 updated lastmods). A row stands in one run at most,
    -- and each row read is in sitemap_fold_rows once, so the counts say it.
    -- Rows are added after rows_read was counted only for a cluster whose
    -- links changed, and every such cluster is in sitemap_fold_clusters:
    -- with none there, rows_read is the count, and counting again took a
    -- scan of every row read (29 ms for 150,000).
    nothing_to_place := CASE WHEN kept_in_runs = 0 THEN NOT EXISTS (SELECT 1 FROM sitemap_fold_rows)
                             WHEN kept_in_runs < rows_read THEN false
                             WHEN NOT EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN true
                             ELSE kept_in_runs = (SELECT count(*) FROM sitemap_fold_rows) END;
    INSERT INTO sitemap_fold_pass VALUES (pass_snapshot, pass_done, seen, stashing);
    -- Read in (change_xid, id) order: of one transaction, the last row read
    -- is the highest id. Otherwise sitemap_fold_end looks for it.
    INSERT INTO sitemap_fold_rows_read
    VALUES (CASE WHEN first_xid_read = last_xid_read THEN last_xid_read END,
            CASE WHEN first_xid_read = last_xid_read THEN last_id_read END, later_lastmods);
    INSERT INTO sitemap_fold_lane VALUES (CASE WHEN lane THEN current_snapshot END, pass_placed_through);
END $$;


--
-- Name: FUNCTION sitemap_fold_begin(max_rows bigint, removals_taken bigint, OUT started boolean, OUT nothing_to_place boolean); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_begin(max_rows bigint, removals_taken bigint, OUT started boolean, OUT nothing_to_place boolean) IS 'Step 1 of a fold, in a REPEATABLE READ transaction that locked sitemap_fold_state before its first query. Takes the removals (at most max_rows; all when NULL) and applies them, or, when removals_taken is given, counts that many as taken and applied to the runs by the service, and takes off sitemap_placements those it left in sitemap_fold_removals; while it may have left some (removals_left), reads nothing else. While a pass is under way, folds as a lane the rows of sitemap_fold_lane_ranges when there are 1 to 10,000 of them, and reads nothing else. Otherwise begins a pass when none is under way and reads changed rows of the transactions the pass covers (sitemap_fold_ranges, sitemap_fold_read), as many as max_rows leaves room for after the removals. Then applies moves and rows changed in place, takes off their pages the rows that outgrew them, writes the ''updated'' and ''removed'' feed entries, and leaves the rows to place, sized, in the temporary view sitemap_fold_unplaced for the service to number. Returns whether it began a pass, and whether every row it read stays as its run placed it, so that there is nothing to place (nothing_to_place): then sitemap_fold_unplaced is not to be read, as the rows kept are not noted for it. One fold a transaction.';


--
-- Name: sitemap_fold_clamp_lastmods(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_clamp_lastmods() RETURNS void
    LANGUAGE plpgsql
    SET jit TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM sitemap_lastmod_clamps) THEN
        DELETE FROM sitemap_lastmod_clamps c
        USING sitemap_fold_rows f
        WHERE c.id = f.id AND f.change_xid IS NOT NULL;
    END IF;
    -- without a row read to clamp (as good as always), no scan for one
    IF NOT coalesce((SELECT later_lastmods FROM sitemap_fold_rows_read), true) THEN
        RETURN;
    END IF;
    INSERT INTO sitemap_lastmod_clamps (id, site, section, written_lastmod, served_lastmod)
    SELECT id, site, section, lastmod, now() FROM sitemap_fold_rows WHERE lastmod > now()
    ON CONFLICT (id) DO UPDATE
        SET site = excluded.site, section = excluded.section,
            written_lastmod = excluded.written_lastmod, served_lastmod = excluded.served_lastmod;
END $$;


--
-- Name: FUNCTION sitemap_fold_clamp_lastmods(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_clamp_lastmods() IS 'Step of a fold, before sitemap_fold_end: records the rows it read whose lastmod is later than the fold''s time (now()), to be served with that time, and forgets the clamps of rows changed since.';


--
-- Name: sitemap_fold_end(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_end(OUT folded bigint, OUT caught_up boolean) RETURNS record
    LANGUAGE plpgsql
    SET jit TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
DECLARE
    pass record;
    lane record;
    after_xid xid8;
    after_id bigint;
BEGIN
    SELECT * INTO pass FROM sitemap_fold_pass;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sitemap_fold_end(): no fold began in this transaction';
    END IF;
    SELECT * INTO lane FROM sitemap_fold_lane;
    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE NOT applied;
    SELECT coalesce(sum(rows_folded), 0) INTO folded FROM sitemap_fold_page_deltas;

    IF (SELECT removals_left FROM sitemap_fold_state) THEN
        -- it took removals only: a pass under way reads on where it stood
        UPDATE sitemap_fold_state SET folded_at = pass.seen;
    ELSIF lane.lane_snapshot IS NOT NULL THEN
        UPDATE sitemap_fold_state SET lane_through = lane.lane_snapshot, folded_at = pass.seen;
    ELSIF pass.pass_done THEN
        -- what lanes folded while the pass ran is folded too
        UPDATE sitemap_fold_state
        SET folded_through = coalesce(lane_through, pass.pass_snapshot), folding_through = NULL,
            read_through_xid = NULL, read_through_id = NULL, lane_through = NULL,
            pass_placed_through = NULL, folded_at = pass.seen;
    ELSE
        SELECT r.last_xid, r.last_id INTO after_xid, after_id FROM sitemap_fold_rows_read r;
        IF after_id IS NULL THEN
            SELECT r.change_xid, r.id INTO after_xid, after_id FROM sitemap_fold_rows r
            WHERE r.change_xid IS NOT NULL ORDER BY r.change_xid DESC, r.id DESC LIMIT 1;
        END IF;
        UPDATE sitemap_fold_state
        SET folding_through = pass.pass_snapshot, read_through_xid = after_xid,
            read_through_id = after_id, pass_placed_through = lane.pass_placed_through,
            folded_at = pass.seen;
    END IF;
    caught_up := pass.pass_done AND NOT EXISTS (SELECT 1 FROM sitemap_unplaced);
END $$;


--
-- Name: FUNCTION sitemap_fold_end(OUT folded bigint, OUT caught_up boolean); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_end(OUT folded bigint, OUT caught_up boolean) IS 'The last step of a fold: adds the page deltas to the summaries (sitemap_apply_deltas) and records how far the pass has read, or the lane folded (nothing, for a fold of removals only). Returns how many rows the fold placed, changed in place or took off a page, and whether it caught up: its pass is done, no removal is left and no row waits to be placed again.';


--
-- Name: sitemap_fold_forget_clamps(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_forget_clamps() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sitemap_lastmod_clamps) THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM sitemap_fold_removals WHERE id IS NULL) THEN
        DELETE FROM sitemap_lastmod_clamps;
    ELSE
        DELETE FROM sitemap_lastmod_clamps c USING sitemap_fold_removals r WHERE c.id = r.id;
    END IF;
END $$;


--
-- Name: FUNCTION sitemap_fold_forget_clamps(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_forget_clamps() IS 'Step of a fold, after sitemap_fold_begin took its removals: drops the lastmod clamps of the rows they deleted (all of them, after a truncation).';


--
-- Name: sitemap_fold_hide_kept(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_hide_kept() RETURNS void
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
    hidden bigint[];
BEGIN
    -- Without a timed row anywhere, nothing to look for among the rows
    -- read (a scan of a million costs 0.1 s).
    IF NOT EXISTS (SELECT 1 FROM sitemap_urls
                   WHERE visible_from IS NOT NULL OR visible_until IS NOT NULL) THEN
        RETURN;
    END IF;
    -- The timed rows through their partial indexes, not a probe per row
    -- read: a fold of a million updates reads no more than before.
    SELECT array_agg(f.id) INTO hidden
    FROM sitemap_fold_rows f
    JOIN (SELECT id, visible_from, visible_until FROM sitemap_urls
          WHERE visible_from IS NOT NULL OR visible_until IS NOT NULL) u ON u.id = f.id
    CROSS JOIN LATERAL sitemap_placement_of(f.id) p
    WHERE f.may_be_placed AND f.change_xid IS NOT NULL
      AND sitemap_window_reason(u.visible_from, u.visible_until, now()) IS NOT NULL
      AND p.page IS NOT NULL;
    IF hidden IS NOT NULL THEN
        PERFORM sitemap_unplace(hidden);
    END IF;
END $$;


--
-- Name: FUNCTION sitemap_fold_hide_kept(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_hide_kept() IS 'Part of a fold, after sitemap_fold_begin: rows it read as changed whose window now leaves them out, and that it kept where they were placed (their entry the same), leave their page; the next fold places them as left out.';


--
-- Name: sitemap_fold_lane_ranges(pg_snapshot, pg_snapshot, xid8, pg_snapshot, pg_snapshot); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_lane_ranges(previous pg_snapshot, pass_snapshot pg_snapshot, after_xid xid8, lane_through pg_snapshot, target pg_snapshot, OUT low xid8, OUT high xid8) RETURNS SETOF record
    LANGUAGE sql STABLE
    AS $$
    SELECT greatest(r.low, (after_xid::text::bigint + 1)::text::xid8), r.high
    FROM sitemap_fold_ranges(previous, pass_snapshot) r
    WHERE lane_through IS NULL AND r.high > after_xid
    UNION ALL
    SELECT r.low, r.high FROM sitemap_fold_ranges(coalesce(lane_through, pass_snapshot), target) r
    ORDER BY 1
$$;


--
-- Name: FUNCTION sitemap_fold_lane_ranges(previous pg_snapshot, pass_snapshot pg_snapshot, after_xid xid8, lane_through pg_snapshot, target pg_snapshot, OUT low xid8, OUT high xid8); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_lane_ranges(previous pg_snapshot, pass_snapshot pg_snapshot, after_xid xid8, lane_through pg_snapshot, target pg_snapshot, OUT low xid8, OUT high xid8) IS 'The transactions a lane reads, as ranges of xids in order: on the first lane of a pass, those the pass would read after after_xid (the one it is reading); then those that committed after the pass''s snapshot, or after the last lane''s.';


--
-- Name: sitemap_fold_ranges(pg_snapshot, pg_snapshot); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_ranges(previous pg_snapshot, target pg_snapshot, OUT low xid8, OUT high xid8) RETURNS SETOF record
    LANGUAGE sql STABLE
    AS $$
    SELECT x, x FROM pg_snapshot_xip(previous) x
    WHERE pg_visible_in_snapshot(x, target)
    UNION ALL
    SELECT low::text::xid8, high::text::xid8
    FROM (SELECT lag(b + 1, 1, pg_snapshot_xmax(previous)::text::bigint) OVER (ORDER BY b) AS low,
                 b - 1 AS high
          FROM (SELECT x::text::bigint AS b FROM pg_snapshot_xip(target) x
                WHERE x >= pg_snapshot_xmax(previous)
                UNION ALL
                SELECT pg_snapshot_xmax(target)::text::bigint) bounds) spans
    WHERE low <= high
    ORDER BY 1
$$;


--
-- Name: FUNCTION sitemap_fold_ranges(previous pg_snapshot, target pg_snapshot, OUT low xid8, OUT high xid8); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_ranges(previous pg_snapshot, target pg_snapshot, OUT low xid8, OUT high xid8) IS 'The transactions a pass reads, as ranges of xids in order: each one the last pass saw running that committed by this pass''s snapshot, then the xids between the two snapshots'' horizons less those running at this pass''s start. So a transaction that commits late is folded by the pass that first sees it committed, never skipped.';


--
-- Name: sitemap_fold_read(xid8, xid8, xid8, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_read(low xid8, high xid8, after_xid xid8, after_id bigint, max_rows bigint, newest_placed bigint) RETURNS bigint
    LANGUAGE plpgsql
    SET enable_sort TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
    -- the transactions read whole: those after the one the last batch
    -- stopped in, which is read on from its last row
    whole_from xid8 := CASE WHEN low = after_xid THEN (low::text::bigint + 1)::text::xid8 ELSE low END;
    taken bigint;
BEGIN
    INSERT INTO sitemap_fold_rows (change_xid, id, site, section, loc, cluster, own_bytes, images, videos,
                                   replaced, may_be_placed, lastmod)
    SELECT u.change_xid, u.id, u.site, u.section, u.loc, u.hreflang_cluster,
           CASE WHEN u.id <= newest_placed THEN sitemap_entry_bytes(u.loc) ELSE 0 END
           + sitemap_media_bytes(u.images, u.videos),
           coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0), false,
           u.id <= newest_placed, u.lastmod
    FROM ((SELECT * FROM sitemap_urls
           -- a range of one xid, not an equality: ordered by (change_xid,
           -- id), the scan can only be that index's, positioned at the row
           -- (the primary key's, filtered by xid, walks every later row)
           WHERE low = after_xid AND change_xid >= low AND change_xid <= low AND id > after_id
           ORDER BY change_xid, id LIMIT max_rows)
          UNION ALL
          (SELECT * FROM sitemap_urls
           WHERE change_xid >= whole_from AND change_xid <= high
           ORDER BY change_xid, id LIMIT max_rows)) u
    ORDER BY u.change_xid, u.id LIMIT max_rows;
    GET DIAGNOSTICS taken = ROW_COUNT;
    RETURN taken;
END $$;


--
-- Name: FUNCTION sitemap_fold_read(low xid8, high xid8, after_xid xid8, after_id bigint, max_rows bigint, newest_placed bigint); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_read(low xid8, high xid8, after_xid xid8, after_id bigint, max_rows bigint, newest_placed bigint) IS 'Reads into sitemap_fold_rows, in (change_xid, id) order and with their lastmods, at most max_rows changed rows with change_xid in [low, high] after (after_xid, after_id), each marked with whether it may have a placement (no row past newest_placed has one); returns how many. A row that may not is sized without its loc: the service sizes its loc as it numbers it. Planned as an ordered walk of the index: a sort or a bitmap of the whole range would read all of it every batch.';


--
-- Name: sitemap_fold_robots_sites(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_robots_sites() RETURNS TABLE(site text, robots_check text, agents text[], robots_txt text)
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_fold_robots_sites(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_robots_sites() IS 'Part of a fold: writes to sitemap_fold_judged (a temporary table) the sites of the rows it read whose locs are judged, and returns them with their check, agents and the robots text of their host.';


--
-- Name: sitemap_fold_windows(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_windows() RETURNS void
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
    since timestamptz;
    moment timestamptz := now();
    moved bigint[];
BEGIN
    SELECT windows_through INTO since FROM sitemap_fold_state;
    -- Rows whose window opened or closed since the last fold, and that a
    -- fold placed as the window was then: they go back to be placed again
    -- (listed or left out as it is now). Rows not placed yet are judged
    -- when they are.
    IF to_regclass('pg_temp.sitemap_fold_window_moves') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_window_moves (
            id bigint PRIMARY KEY, site text NOT NULL, loc text NOT NULL, change text NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    INSERT INTO sitemap_fold_window_moves (id, site, loc, change)
    SELECT d.id, d.site, d.loc, CASE WHEN d.listed THEN 'added' ELSE 'removed' END
    FROM (SELECT u.id, u.site, u.loc,
                 sitemap_window_reason(u.visible_from, u.visible_until, moment) IS NULL AS listed
          FROM sitemap_urls u
          WHERE u.visible_from > since AND u.visible_from <= moment
          UNION
          SELECT u.id, u.site, u.loc,
                 sitemap_window_reason(u.visible_from, u.visible_until, moment) IS NULL
          FROM sitemap_urls u
          WHERE u.visible_until > since AND u.visible_until <= moment) d
    CROSS JOIN LATERAL sitemap_placement_of(d.id) p
    WHERE (p.page IS NOT NULL) <> d.listed
      AND (p.page IS NOT NULL OR p.skip_reason IN ('not-yet-visible', 'no-longer-visible'))
    ON CONFLICT DO NOTHING;
    SELECT array_agg(id) INTO moved FROM sitemap_fold_window_moves;
    IF moved IS NOT NULL THEN
        PERFORM sitemap_unplace(moved);
        -- Crawlers told of the URL at the moment it entered or left.
        IF EXISTS (SELECT 1 FROM sitemap_change_stash) THEN
            INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
            SELECT site, change, moment, array_agg(loc ORDER BY id)
            FROM sitemap_fold_window_moves GROUP BY site, change;
        ELSE
            INSERT INTO sitemap_changes (site, loc, change, committed_at)
            SELECT site, loc, change, moment FROM sitemap_fold_window_moves ORDER BY id;
        END IF;
        UPDATE sitemap_news_state SET due = '-infinity';
    END IF;
    UPDATE sitemap_fold_state SET windows_through = moment WHERE windows_through < moment;
END $$;


--
-- Name: FUNCTION sitemap_fold_windows(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_windows() IS 'Part of a fold, under its lock, before its rows are read: takes off their pages (or out of the left-out) the rows whose visibility window opened or closed since sitemap_fold_state.windows_through, to be placed again by this fold as the window now is, and writes their feed entries (added, removed) at that moment.';


--
-- Name: sitemap_fold_working_tables(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_fold_working_tables() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- Working tables, kept by the connection between folds (emptied at
    -- each commit), so frequent folds do not churn the catalog.
    -- rows in runs that this fold finds changed
    IF to_regclass('pg_temp.sitemap_fold_in_runs') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_in_runs (
            id bigint NOT NULL,
            -- where the run placed it
            site text NOT NULL,
            section text NOT NULL,
            page integer NOT NULL,
            bytes integer NOT NULL,
            loc text NOT NULL,
            -- 'moved' (now another URL), 'kept' (its entry as placed: it
            -- stays), or 'changed' (placed alone from here on)
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
            may_be_placed boolean NOT NULL,
            -- its lastmod, when it was read as changed: one later than the
            -- fold's time is served as that (sitemap_fold_clamp_lastmods)
            lastmod timestamptz NULL
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
    -- made by this connection before the table had the column (see above)
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'pg_temp.sitemap_fold_rows'::regclass AND attname = 'lastmod') THEN
        ALTER TABLE pg_temp.sitemap_fold_rows ADD COLUMN lastmod timestamptz NULL;
    END IF;
    -- the fold under way in this transaction, from its beginning to its end
    IF to_regclass('pg_temp.sitemap_fold_pass') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_pass (
            pass_snapshot pg_snapshot NOT NULL,
            pass_done boolean NOT NULL,
            seen timestamptz NOT NULL,
            stashing boolean NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    -- what this fold's rows read tell its last steps without a scan of
    -- them: the last row read, when every row read is of one transaction,
    -- and whether any has a lastmod later than the fold's time
    IF to_regclass('pg_temp.sitemap_fold_rows_read') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_rows_read (
            last_xid xid8 NULL,
            last_id bigint NULL,
            later_lastmods boolean NOT NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    IF to_regclass('pg_temp.sitemap_fold_lane') IS NULL THEN
        -- this fold's lane: the snapshot it folded through, when it is one
        CREATE TEMP TABLE sitemap_fold_lane (
            lane_snapshot pg_snapshot NULL,
            pass_placed_through bigint NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
    -- The rows the service places (see above): every row read without a
    -- place, its size and reason to be left out as they are now.
    -- A view made by this connection before it had loc_sized is made again.
    IF to_regclass('pg_temp.sitemap_fold_unplaced') IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_attribute
                       WHERE attrelid = to_regclass('pg_temp.sitemap_fold_unplaced') AND attname = 'loc_sized') THEN
        DROP VIEW pg_temp.sitemap_fold_unplaced;
    END IF;
    IF to_regclass('pg_temp.sitemap_fold_unplaced') IS NULL THEN
        CREATE TEMP VIEW sitemap_fold_unplaced AS
        SELECT f.id, f.site, f.section, f.loc, sitemap_loc_hash(f.loc) AS loc_hash,
               f.cluster, f.replaced, f.images, f.videos,
               f.own_bytes + coalesce(k.link_bytes, 0) AS bytes,
               coalesce(cardinality(k.hrefs), 0) AS alternates,
               -- own_bytes counts the loc only of a row that may have a
               -- placement; the service sizes the others' locs
               f.may_be_placed AS loc_sized,
               CASE WHEN s.site IS NULL THEN 'site not configured'
                    WHEN NOT ((s.plain_base AND starts_with(f.loc, s.base) AND strpos(f.loc, '/.') = 0)
                              OR sitemap_loc_in_scope(f.loc, s.origin, s.path_prefix))
                        THEN 'loc outside the site''s base URL ' || s.origin || s.path_prefix
                    -- An entry takes at most six bytes a byte of its loc (a
                    -- quote written as &quot;) besides its markup: a loc the
                    -- service sizes is sized here only when it could be over.
                    WHEN NOT f.may_be_placed
                         AND f.own_bytes + coalesce(k.link_bytes, 0) + sitemap_entry_bytes('')
                             + 6 * octet_length(f.loc) <= (SELECT entry_budget FROM sitemap_settings)
                        THEN NULL
                    WHEN f.own_bytes + coalesce(k.link_bytes, 0)
                         + CASE WHEN f.may_be_placed THEN 0 ELSE sitemap_entry_bytes(f.loc) END
                         > (SELECT entry_budget FROM sitemap_settings)
                        THEN format('entry of %s bytes, over the page budget of %s (max_bytes less %s)',
                                    f.own_bytes + coalesce(k.link_bytes, 0)
                                    + CASE WHEN f.may_be_placed THEN 0 ELSE sitemap_entry_bytes(f.loc) END,
                                    (SELECT entry_budget FROM sitemap_settings), 1024)
               END AS skip_reason
        -- the settings in subqueries, not joined: a join is a step per row
        -- even for a query that reads no setting (the feed's)
        FROM sitemap_fold_rows f
        -- Each site's base, and whether the scope rule's shortcut holds for
        -- it (see sitemap_loc_in_scope), worked out once, not per row: 0.4 s
        -- per million rows. Grouped by its key, so a query that reads no
        -- column of it (the feed's) does not join it at all.
        LEFT JOIN (SELECT site, origin, path_prefix, origin || path_prefix AS base,
                          left(path_prefix, 1) = '/' AND origin = lower(origin) AS plain_base
                   FROM sitemap_sites GROUP BY site) s ON s.site = f.site
        LEFT JOIN sitemap_clusters k ON k.cluster = f.cluster AND k.problem IS NULL
        WHERE NOT (f.may_be_placed AND (EXISTS (SELECT 1 FROM sitemap_placements p WHERE p.id = f.id)
                                         OR EXISTS (SELECT 1 FROM sitemap_fold_in_runs r
                                                    WHERE r.id = f.id AND r.fate = 'kept')));
    END IF;
    -- This fold's removals: all of them, or at most max_rows.
    IF to_regclass('pg_temp.sitemap_fold_removals') IS NULL THEN
        CREATE TEMP TABLE sitemap_fold_removals (
            id bigint NULL,
            site text NULL,
            loc text NULL
        ) ON COMMIT DELETE ROWS;
    END IF;
END $$;


--
-- Name: FUNCTION sitemap_fold_working_tables(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_fold_working_tables() IS 'Makes this connection''s temporary working tables of a fold (kept between folds, emptied at each commit) and the view sitemap_fold_unplaced, where they are missing or older than their columns. sitemap_fold_begin calls it; the service calls it first when it applies the removals itself.';


--
-- Name: sitemap_host_robots_txt(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_host_robots_txt(p_host text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT robots_txt FROM sitemap_sites
    WHERE host = p_host AND robots_txt IS NOT NULL
    ORDER BY octet_length(path_prefix), site COLLATE "C" DESC
    LIMIT 1
$$;


--
-- Name: FUNCTION sitemap_host_robots_txt(p_host text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_host_robots_txt(p_host text) IS 'The robots.txt a host serves: that of its site with the shortest base path that has one (of two alike, the name that sorts last), as the service picks it.';


--
-- Name: sitemap_iso_countries(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_iso_countries() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT '{AD,AE,AF,AG,AI,AL,AM,AO,AQ,AR,AS,AT,AU,AW,AX,AZ,BA,BB,BD,BE,BF,BG,BH,BI,BJ,BL,BM,BN,BO,BQ,BR,BS,BT,BV,BW,BY,BZ,CA,CC,CD,CF,CG,CH,CI,CK,CL,CM,CN,CO,CR,CU,CV,CW,CX,CY,CZ,DE,DJ,DK,DM,DO,DZ,EC,EE,EG,EH,ER,ES,ET,FI,FJ,FK,FM,FO,FR,GA,GB,GD,GE,GF,GG,GH,GI,GL,GM,GN,GP,GQ,GR,GS,GT,GU,GW,GY,HK,HM,HN,HR,HT,HU,ID,IE,IL,IM,IN,IO,IQ,IR,IS,IT,JE,JM,JO,JP,KE,KG,KH,KI,KM,KN,KP,KR,KW,KY,KZ,LA,LB,LC,LI,LK,LR,LS,LT,LU,LV,LY,MA,MC,MD,ME,MF,MG,MH,MK,ML,MM,MN,MO,MP,MQ,MR,MS,MT,MU,MV,MW,MX,MY,MZ,NA,NC,NE,NF,NG,NI,NL,NO,NP,NR,NU,NZ,OM,PA,PE,PF,PG,PH,PK,PL,PM,PN,PR,PS,PT,PW,PY,QA,RE,RO,RS,RU,RW,SA,SB,SC,SD,SE,SG,SH,SI,SJ,SK,SL,SM,SN,SO,SR,SS,ST,SV,SX,SY,SZ,TC,TD,TF,TG,TH,TJ,TK,TL,TM,TN,TO,TR,TT,TV,TW,TZ,UA,UG,UM,US,UY,UZ,VA,VC,VE,VG,VI,VN,VU,WF,WS,YE,YT,ZA,ZM,ZW}'::text[]
$$;


--
-- Name: FUNCTION sitemap_iso_countries(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_iso_countries() IS 'ISO 3166-1 alpha-2 country codes (upper case).';


--
-- Name: sitemap_iso_languages(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_iso_languages() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT '{aa,ab,ae,af,ak,am,an,ar,as,av,ay,az,ba,be,bg,bh,bi,bm,bn,bo,br,bs,ca,ce,ch,co,cr,cs,cu,cv,cy,da,de,dv,dz,ee,el,en,eo,es,et,eu,fa,ff,fi,fj,fo,fr,fy,ga,gd,gl,gn,gu,gv,ha,he,hi,ho,hr,ht,hu,hy,hz,ia,id,ie,ig,ii,ik,io,is,it,iu,ja,jv,ka,kg,ki,kj,kk,kl,km,kn,ko,kr,ks,ku,kv,kw,ky,la,lb,lg,li,ln,lo,lt,lu,lv,mg,mh,mi,mk,ml,mn,mr,ms,mt,my,na,nb,nd,ne,ng,nl,nn,no,nr,nv,ny,oc,oj,om,or,os,pa,pi,pl,ps,pt,qu,rm,rn,ro,ru,rw,sa,sc,sd,se,sg,si,sk,sl,sm,sn,so,sq,sr,ss,st,su,sv,sw,ta,te,tg,th,ti,tk,tl,tn,to,tr,ts,tt,tw,ty,ug,uk,ur,uz,ve,vi,vo,wa,wo,xh,yi,yo,za,zh,zu}'::text[]
$$;


--
-- Name: FUNCTION sitemap_iso_languages(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_iso_languages() IS 'ISO 639-1 language codes (lower case).';


--
-- Name: sitemap_lastmod_clamps_counted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_lastmod_clamps_counted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_lastmod_clamps_counted(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_lastmod_clamps_counted() IS 'After each statement that writes sitemap_lastmod_clamps: counts the clamps it added, dropped or moved to another section in sitemap_lastmod_clamp_counts.';


--
-- Name: sitemap_loc_hash(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_loc_hash(loc text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT hashtextextended(loc, 0)
$$;


--
-- Name: FUNCTION sitemap_loc_hash(loc text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_loc_hash(loc text) IS 'How a placement remembers the loc it was placed with: a row whose loc hashes otherwise is another URL now. Not STRICT, so it is inlined.';


--
-- Name: sitemap_loc_in_scope(text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_loc_in_scope(loc text, origin text, path_prefix text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
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
$_$;


--
-- Name: FUNCTION sitemap_loc_in_scope(loc text, origin text, path_prefix text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_loc_in_scope(loc text, origin text, path_prefix text) IS 'Whether a loc is served under a site''s origin and path prefix: same scheme and host (case-insensitive), a path under the prefix, and no dot segment that would climb out of it. The usual loc, which starts with the origin and prefix as written and has no "/.", is decided by two byte comparisons.';


--
-- Name: sitemap_media_bytes(jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_media_bytes(images jsonb, videos jsonb) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT CASE WHEN images IS NULL AND videos IS NULL THEN 0
            ELSE sitemap_media_elements_bytes(images, videos) END
$$;


--
-- Name: FUNCTION sitemap_media_bytes(images jsonb, videos jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_media_bytes(images jsonb, videos jsonb) IS 'The bytes of an entry''s image and video elements: 0 without either, as most rows are, before any JSON is read.';


--
-- Name: sitemap_media_elements_bytes(jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_media_elements_bytes(images jsonb, videos jsonb) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    total integer := 0;
BEGIN
    -- an element that cannot be sized (no loc, a video without a title)
    -- adds nothing, as in a sum
    FOR i IN 0 .. coalesce(jsonb_array_length(images), 0) - 1 LOOP
        total := total + coalesce(octet_length('<image:image><image:loc></image:loc></image:image>')
                                  + sitemap_url_bytes(images -> i ->> 'loc'), 0);
    END LOOP;
    FOR i IN 0 .. coalesce(jsonb_array_length(videos), 0) - 1 LOOP
        total := total + coalesce(sitemap_video_bytes(videos -> i), 0);
    END LOOP;
    RETURN total;
END $$;


--
-- Name: FUNCTION sitemap_media_elements_bytes(images jsonb, videos jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_media_elements_bytes(images jsonb, videos jsonb) IS 'The bytes of an entry''s image and video elements as the writer writes them; sitemap_media_bytes calls it only for rows that have either.';


--
-- Name: sitemap_news_entry_bytes(text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_news_entry_bytes(loc text, news jsonb) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT sitemap_entry_bytes(loc)
    + octet_length('<news:news><news:publication><news:name></news:name><news:language></news:language>'
                   '</news:publication><news:publication_date></news:publication_date>'
                   '<news:title></news:title></news:news>')
    + sitemap_text_bytes(news ->> 'publication_name') + sitemap_text_bytes(news ->> 'language')
    + sitemap_text_bytes(news ->> 'publication_date') + sitemap_text_bytes(news ->> 'title')
$$;


--
-- Name: FUNCTION sitemap_news_entry_bytes(loc text, news jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_news_entry_bytes(loc text, news jsonb) IS 'The most bytes an article''s entry takes in a news sitemap: a page entry''s reserve for its loc, and its news element as the writer writes it.';


--
-- Name: sitemap_news_listing(text, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_news_listing(p_site text, window_end timestamp with time zone) RETURNS TABLE(id bigint, n bigint, updated_at timestamp with time zone, bytes integer)
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: FUNCTION sitemap_news_listing(p_site text, window_end timestamp with time zone); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_news_listing(p_site text, window_end timestamp with time zone) IS 'A site''s placed articles first published in the 48 hours before window_end, numbered newest first (n) as the news files list them, with the bytes each entry takes.';


--
-- Name: sitemap_news_published(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_news_published(news jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT sitemap_w3c_datetime(news ->> 'publication_date')
$$;


--
-- Name: FUNCTION sitemap_news_published(news jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_news_published(news jsonb) IS 'When an article was first published, as stored; deterministic, as the CHECK admits only W3C datetimes.';


--
-- Name: sitemap_origin_host(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_origin_host(origin text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT substring(origin FROM '^[a-z][a-z0-9+.-]*://(\[[^]]*\]|[^:/]*)')
$$;


--
-- Name: FUNCTION sitemap_origin_host(origin text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_origin_host(origin text) IS 'The host of an origin (scheme://host[:port]), without its port: what requests are routed by.';


--
-- Name: sitemap_pages_announce(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_pages_announce() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    names text := '';
    sent integer := 0;
    site_name text;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('sitemapd_pages', '*');
        RETURN NULL;
    END IF;
    FOR site_name IN SELECT DISTINCT site FROM changed_rows ORDER BY site LOOP
        IF octet_length(names) + 1 + octet_length(site_name) > 7900 THEN
            sent := sent + 1;
            IF sent = 8 THEN
                PERFORM pg_notify('sitemapd_pages', '*');
                RETURN NULL;
            END IF;
            PERFORM pg_notify('sitemapd_pages', names);
            names := '';
        END IF;
        names := CASE WHEN names = '' THEN site_name ELSE names || ' ' || site_name END;
    END LOOP;
    IF names <> '' THEN
        PERFORM pg_notify('sitemapd_pages', names);
    END IF;
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_pages_announce(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_pages_announce() IS 'Statement triggers on sitemap_pages and sitemap_news_files: notify sitemapd_pages with the names of the sites whose pages the statement changed (space-separated, at most 7,900 bytes a notification; ''*'' for every site past eight notifications, and on TRUNCATE), so servers drop those sites'' summaries alone. PostgreSQL delivers at commit and folds duplicates within a transaction.';


--
-- Name: sitemap_placement_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_placement_runs (
    run bigint NOT NULL,
    site text NOT NULL COLLATE pg_catalog."C",
    section text NOT NULL COLLATE pg_catalog."C",
    page integer NOT NULL,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    ids bigint[] NOT NULL,
    loc_hashes bigint[] NOT NULL,
    bytes integer[] NOT NULL,
    CONSTRAINT sitemap_placement_runs_check CHECK (((cardinality(ids) >= 1) AND (cardinality(ids) = cardinality(loc_hashes)) AND (cardinality(ids) = cardinality(bytes)))),
    CONSTRAINT sitemap_placement_runs_page_check CHECK ((page >= 1))
);


--
-- Name: TABLE sitemap_placement_runs; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_placement_runs IS 'Up to 64 consecutive rows of a section placed together on one page, as one row whose arrays give each row''s id, loc hash and reserved bytes: a bulk load costs one small row per 64 URLs instead of a placement each. A row changed in place keeps its run when its entry is as placed; otherwise it leaves its run (sitemap_explode).';


--
-- Name: sitemap_placements; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_placements (
    id bigint NOT NULL,
    site text NOT NULL COLLATE pg_catalog."C",
    section text NOT NULL COLLATE pg_catalog."C",
    loc_hash bigint NOT NULL,
    page integer,
    bytes integer NOT NULL,
    skip_reason text,
    skip_logged boolean DEFAULT false NOT NULL,
    images integer DEFAULT 0 NOT NULL,
    videos integer DEFAULT 0 NOT NULL,
    alternates integer DEFAULT 0 NOT NULL,
    cluster text,
    robots_rule text,
    CONSTRAINT sitemap_placements_bytes_check CHECK ((bytes >= 0)),
    CONSTRAINT sitemap_placements_check CHECK (((page IS NULL) <> (skip_reason IS NULL))),
    CONSTRAINT sitemap_placements_page_check CHECK ((page >= 1))
);


--
-- Name: TABLE sitemap_placements; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_placements IS 'Where a row is served (page) or why it is not (skip_reason), with the bytes its entry reserves and the loc hash it was placed with. Rows with extensions are placed here one by one; plain rows placed together stand in sitemap_placement_runs. A row stands in one placement or one run, never both. Written by folds alone.';


--
-- Name: COLUMN sitemap_placements.robots_rule; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_placements.robots_rule IS 'The robots.txt rule that disallows the row, as ''Disallow: PATTERN (User-agent: NAME)'': on a row left out (skip_reason robots-disallowed), or placed alone on its page where the site reports such rows. Null for every other row.';


--
-- Name: sitemap_placed; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.sitemap_placed AS
 SELECT sitemap_placements.id,
    sitemap_placements.site,
    sitemap_placements.section,
    sitemap_placements.loc_hash,
    sitemap_placements.page,
    sitemap_placements.bytes,
    sitemap_placements.skip_reason,
    sitemap_placements.images,
    sitemap_placements.videos,
    sitemap_placements.alternates,
    sitemap_placements.cluster
   FROM public.sitemap_placements
UNION ALL
 SELECT m.id,
    r.site,
    r.section,
    m.loc_hash,
    r.page,
    m.bytes,
    NULL::text AS skip_reason,
    0 AS images,
    0 AS videos,
    0 AS alternates,
    NULL::text AS cluster
   FROM (public.sitemap_placement_runs r
     CROSS JOIN LATERAL UNNEST(r.ids, r.loc_hashes, r.bytes) m(id, loc_hash, bytes));


--
-- Name: VIEW sitemap_placed; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON VIEW public.sitemap_placed IS 'Every placement, one row per URL, whether it stands alone or in a run. Filter it by (site, section, page): both halves are read through their page indexes. By id, use sitemap_placement_of.';


--
-- Name: sitemap_placement_of(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_placement_of(row_id bigint) RETURNS SETOF public.sitemap_placed
    LANGUAGE sql STABLE
    AS $$
    SELECT id, site, section, loc_hash, page, bytes, skip_reason, images, videos, alternates, cluster
    FROM sitemap_placements WHERE id = row_id
    UNION ALL
    SELECT row_id, r.site, r.section, r.loc_hashes[i], r.page, r.bytes[i], NULL::text, 0, 0, 0, NULL::text
    FROM sitemap_placement_runs r
    CROSS JOIN LATERAL array_position(r.ids, row_id) AS i
    WHERE int8range(r.first_id, r.last_id, '[]') @> row_id AND i IS NOT NULL
$$;


--
-- Name: FUNCTION sitemap_placement_of(row_id bigint); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_placement_of(row_id bigint) IS 'The placement of one row, alone or in a run: a probe of each by its index (sitemap_placed filtered by id would unnest every run).';


--
-- Name: sitemap_rebuild_clusters(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_rebuild_clusters() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- A URL two sites' rows put in two clusters puts both in question.
    INSERT INTO sitemap_fold_clusters (cluster)
    SELECT DISTINCT o.hreflang_cluster
    FROM sitemap_fold_clusters t
    JOIN sitemap_urls m ON m.hreflang_cluster = t.cluster
    JOIN sitemap_sites s ON s.site <> m.site
    JOIN sitemap_urls o ON o.site = s.site AND o.loc = m.loc
    WHERE o.hreflang_cluster <> t.cluster
    ON CONFLICT DO NOTHING;

    WITH members AS (
        SELECT DISTINCT t.cluster, m.site, m.loc, code
        FROM sitemap_fold_clusters t
        JOIN sitemap_urls m ON m.hreflang_cluster = t.cluster
        CROSS JOIN LATERAL unnest(m.hreflang) code
    ), claimed_twice AS (
        SELECT DISTINCT ON (m.cluster) m.cluster, m.loc, o.hreflang_cluster AS other
        FROM (SELECT DISTINCT cluster, site, loc FROM members) m
        JOIN sitemap_sites s ON s.site <> m.site
        JOIN sitemap_urls o ON o.site = s.site AND o.loc = m.loc
        WHERE o.hreflang_cluster <> m.cluster
        ORDER BY m.cluster, m.loc
    ), shared_code AS (
        SELECT DISTINCT ON (cluster) cluster, code, locs
        FROM (SELECT cluster, lower(code) AS code, array_agg(DISTINCT loc) AS locs
              FROM members GROUP BY cluster, lower(code) HAVING count(DISTINCT loc) > 1) d
        ORDER BY cluster, code
    ), built AS (
        SELECT cluster,
               array_agg(code ORDER BY lower(code), loc) AS hreflangs,
               array_agg(loc ORDER BY lower(code), loc) AS hrefs,
               sum(octet_length('<xhtml:link rel="alternate" hreflang="" href=""/>')
                   + octet_length(code) + sitemap_url_bytes(loc))::integer AS link_bytes,
               count(DISTINCT loc) AS urls
        FROM (SELECT DISTINCT cluster, code, loc FROM members) d
        GROUP BY cluster
    )
    UPDATE sitemap_fold_clusters t
    SET built = true, hreflangs = b.hreflangs, hrefs = b.hrefs, link_bytes = b.link_bytes,
        problem = CASE
            WHEN c.cluster IS NOT NULL THEN format('%s is also in cluster %s', c.loc, c.other)
            WHEN d.cluster IS NOT NULL
                THEN format('hreflang %s is claimed by more than one URL: %s', d.code, array_to_string(d.locs, ', '))
            WHEN b.urls < 2 THEN format('only one URL (%s): a cluster links two or more', b.hrefs[1])
        END
    FROM built b
    LEFT JOIN claimed_twice c ON c.cluster = b.cluster
    LEFT JOIN shared_code d ON d.cluster = b.cluster
    WHERE t.cluster = b.cluster;

    -- What members serve: the links, or none.
    UPDATE sitemap_fold_clusters t
    SET changed = (CASE WHEN t.built AND t.problem IS NULL THEN (t.hreflangs, t.hrefs) END)
        IS DISTINCT FROM (CASE WHEN k.cluster IS NOT NULL AND k.problem IS NULL THEN (k.hreflangs, k.hrefs) END)
    FROM sitemap_fold_clusters u LEFT JOIN sitemap_clusters k ON k.cluster = u.cluster
    WHERE t.cluster = u.cluster;

    DELETE FROM sitemap_clusters k USING sitemap_fold_clusters t
    WHERE k.cluster = t.cluster AND NOT t.built;
    INSERT INTO sitemap_clusters AS k (cluster, hreflangs, hrefs, link_bytes, problem)
    SELECT cluster, hreflangs, hrefs, link_bytes, problem FROM sitemap_fold_clusters WHERE built
    ON CONFLICT (cluster) DO UPDATE
    SET hreflangs = excluded.hreflangs, hrefs = excluded.hrefs, link_bytes = excluded.link_bytes,
        problem = excluded.problem
    WHERE (k.hreflangs, k.hrefs, k.problem) IS DISTINCT FROM (excluded.hreflangs, excluded.hrefs, excluded.problem);
END $$;


--
-- Name: FUNCTION sitemap_rebuild_clusters(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_rebuild_clusters() IS 'Part of a fold: rebuilds the hreflang clusters listed in sitemap_fold_clusters from the rows that name them, and marks those whose served links changed, so their members'' pages change too.';


--
-- Name: sitemap_record_crawler_fetches(text[], text[], text[], boolean[], timestamp with time zone[], timestamp with time zone[], integer[], timestamp with time zone[], bigint[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_record_crawler_fetches(p_site text[], p_file text[], p_crawler text[], p_verified boolean[], p_first timestamp with time zone[], p_last timestamp with time zone[], p_status integer[], p_version timestamp with time zone[], p_fetches bigint[], p_bytes bigint[]) RETURNS void
    LANGUAGE sql
    AS $$
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


--
-- Name: sitemap_record_crawler_hours(text[], text[], timestamp with time zone[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_record_crawler_hours(p_site text[], p_crawler text[], p_hour timestamp with time zone[], p_fetches bigint[]) RETURNS void
    LANGUAGE sql
    AS $$
    INSERT INTO sitemap_crawler_hours AS h (site, crawler, hour, fetches)
    SELECT * FROM unnest(p_site, p_crawler, p_hour, p_fetches)
    ORDER BY 1, 3, 2
    ON CONFLICT (site, hour, crawler) DO UPDATE SET fetches = h.fetches + excluded.fetches
$$;


--
-- Name: sitemap_refresh_news(timestamp with time zone, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_refresh_news(window_end timestamp with time zone, changed boolean) RETURNS void
    LANGUAGE plpgsql
    SET jit TO 'off'
    AS $$
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


--
-- Name: FUNCTION sitemap_refresh_news(window_end timestamp with time zone, changed boolean); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_refresh_news(window_end timestamp with time zone, changed boolean) IS 'Lists every site''s news files anew for the window ending at window_end when changed (rows were folded) or an article is due to leave; a file whose articles differ from the last listing gets a new lastmod.';


--
-- Name: sitemap_refuse(text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_refuse(field text, value text, rule text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation',
        MESSAGE = format('sitemap_urls.%s %s: %s', field,
                         CASE WHEN char_length(value) > 100 THEN to_json(left(value, 100) || '…')::text
                              ELSE to_json(value)::text END,
                         rule);
END $$;


--
-- Name: FUNCTION sitemap_refuse(field text, value text, rule text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_refuse(field text, value text, rule text) IS 'Raises check_violation naming the field, the value (cut to 100 characters) and the rule, as the service''s validator words it. Called by the sitemap_check_* functions.';


--
-- Name: sitemap_robots_verdicts(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_robots_verdicts(p_site text) RETURNS TABLE(id bigint, loc text, placed boolean, robots_rule text)
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: FUNCTION sitemap_robots_verdicts(p_site text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_robots_verdicts(p_site text) IS 'The rows of a site a robots.txt change may move: those placed (alone or in runs) and those left out as robots-disallowed, each with its loc, whether it is placed, and the rule that disallows it (sitemap_placements.robots_rule).';


--
-- Name: sitemap_run_members(bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_run_members(wanted bigint[]) RETURNS TABLE(run bigint, site text, section text, page integer, id bigint, loc_hash bigint, bytes integer)
    LANGUAGE plpgsql STABLE ROWS 100000
    AS $$
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


--
-- Name: FUNCTION sitemap_run_members(wanted bigint[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_run_members(wanted bigint[]) IS 'Which of the rows wanted stand in a run: the run, where it is, and what each was placed with. Few rows are looked up by id, one index probe each; many (a bulk update or delete) by reading the runs over their ids once and joining.';


--
-- Name: sitemap_served_chars(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_served_chars(loc text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT CASE WHEN octet_length(loc) = char_length(loc) THEN octet_length(loc)
            ELSE octet_length(loc) + 2 * octet_length(regexp_replace(loc, '[\x01-\x7f]', '', 'g'))
       END
$$;


--
-- Name: FUNCTION sitemap_served_chars(loc text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_served_chars(loc text) IS 'A loc''s length as served, where every non-ASCII byte is written as %XX (three characters): the protocol''s 2,048 characters apply to that.';


--
-- Name: sitemap_served_lastmod(timestamp with time zone, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_served_lastmod(lastmod timestamp with time zone, written_lastmod timestamp with time zone, served_lastmod timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN written_lastmod = lastmod THEN served_lastmod
                WHEN lastmod > now() THEN now()
                ELSE lastmod END
$$;


--
-- Name: FUNCTION sitemap_served_lastmod(lastmod timestamp with time zone, written_lastmod timestamp with time zone, served_lastmod timestamp with time zone); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_served_lastmod(lastmod timestamp with time zone, written_lastmod timestamp with time zone, served_lastmod timestamp with time zone) IS 'The lastmod a row is served with, given its clamp (sitemap_lastmod_clamps, NULLs for none): the clamp''s time while the row''s lastmod is still the one clamped; else its lastmod, and now for a future one no fold has seen yet.';


--
-- Name: sitemap_set_robots_rules(bigint[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_set_robots_rules(ids bigint[], rules text[]) RETURNS void
    LANGUAGE sql
    AS $$
    SELECT sitemap_explode(ids);
    UPDATE sitemap_placements p SET robots_rule = v.rule
    FROM unnest(ids, rules) AS v(id, rule)
    WHERE p.id = v.id;
$$;


--
-- Name: FUNCTION sitemap_set_robots_rules(ids bigint[], rules text[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_set_robots_rules(ids bigint[], rules text[]) IS 'Sets the robots.txt rule of rows that stay where they are (placed, or left out as disallowed): those in runs are placed alone first, on the same page, so no page changes.';


--
-- Name: sitemap_site_tokens_after_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_site_tokens_after_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('sitemapd_sites', 'token ' ||
        CASE WHEN TG_OP = 'DELETE' THEN OLD.digest ELSE NEW.digest END);
    IF TG_OP = 'UPDATE' AND OLD.digest <> NEW.digest THEN
        PERFORM pg_notify('sitemapd_sites', 'token ' || OLD.digest);
    END IF;
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_site_tokens_after_change(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_site_tokens_after_change() IS 'Announces a minted, moved or revoked site token on channel sitemapd_sites (''token DIGEST'').';


--
-- Name: sitemap_sites_after_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_sites_after_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_sites_after_change(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_sites_after_change() IS 'Announces a created, changed or removed site on channel sitemapd_sites (''site NAME HOST [OLD_HOST [OLD_NAME]]''), and queues a new site, or one whose base URL changed, for the next fold to place its rows again.';


--
-- Name: sitemap_sites_audit_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_sites_audit_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (OLD.audit, OLD.audit_leave_out) IS DISTINCT FROM (NEW.audit, NEW.audit_leave_out) THEN
        INSERT INTO sitemap_audit_changes (site) VALUES (NEW.site) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_sites_audit_changed(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_sites_audit_changed() IS 'Queues a site whose audit or audit_leave_out changed in sitemap_audit_changes.';


--
-- Name: sitemap_sites_before_update(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_sites_before_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END $$;


--
-- Name: FUNCTION sitemap_sites_before_update(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_sites_before_update() IS 'Stamps updated_at on every change of a site.';


--
-- Name: sitemap_sites_robots_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_sites_robots_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: FUNCTION sitemap_sites_robots_changed(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_sites_robots_changed() IS 'Queues in sitemap_robots_changes the sites to judge again after a site''s change: itself when its robots_check or agents changed; every site of its host (old and new) when the robots text the host serves may have.';


--
-- Name: sitemap_text_bytes(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_text_bytes(value text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT octet_length(value)
    + 4 * (char_length(value) - char_length(replace(value, '&', '')))
    + 3 * (char_length(value) - char_length(translate(value, '<>', '')))
    + 5 * (char_length(value) - char_length(translate(value, '"''', '')))
$$;


--
-- Name: FUNCTION sitemap_text_bytes(value text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_text_bytes(value text) IS 'Bytes of a text as the writer emits it: the five XML entities escaped.';


--
-- Name: sitemap_unplace(bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_unplace(ids bigint[]) RETURNS void
    LANGUAGE sql
    AS $$
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


--
-- Name: FUNCTION sitemap_unplace(ids bigint[]); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_unplace(ids bigint[]) IS 'Takes the rows ids off their pages, alone or in runs, subtracts them from their pages'' summaries, and queues them in sitemap_unplaced to be placed again.';


--
-- Name: sitemap_url_bytes(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_url_bytes(url text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT sitemap_entry_bytes(url) - 125
$$;


--
-- Name: FUNCTION sitemap_url_bytes(url text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_url_bytes(url text) IS 'Bytes of a URL as the writer emits it: the five XML entities escaped, non-ASCII percent-encoded.';


--
-- Name: sitemap_urls_after_delete(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_urls_after_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO sitemap_removals (id, site, loc) SELECT id, site, loc FROM old_rows;
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_urls_after_delete(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_urls_after_delete() IS 'After DELETE, once per statement: the deleted URLs go to sitemap_removals for the next fold.';


--
-- Name: sitemap_urls_after_move(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_urls_after_move() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO sitemap_removals (id, site, loc) VALUES (OLD.id, OLD.site, OLD.loc);
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_urls_after_move(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_urls_after_move() IS 'After an UPDATE of site, section or loc: the old URL goes to sitemap_removals, so the next fold takes it off its page and feeds its removal.';


--
-- Name: sitemap_urls_after_truncate(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_urls_after_truncate() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO sitemap_removals (id, site, loc) VALUES (NULL, NULL, NULL);
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_urls_after_truncate(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_urls_after_truncate() IS 'After TRUNCATE: one row with a NULL id in sitemap_removals tells the next fold to empty every page.';


--
-- Name: sitemap_urls_before_update(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_urls_before_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.id <> OLD.id THEN
        RAISE EXCEPTION 'sitemap_urls.id is managed by sitemapd and cannot change (row %)', OLD.id;
    END IF;
    IF (NEW.site, NEW.section, NEW.loc, NEW.lastmod, NEW.changefreq, NEW.priority,
        NEW.images, NEW.videos, NEW.news, NEW.hreflang, NEW.hreflang_cluster)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority,
        OLD.images, OLD.videos, OLD.news, OLD.hreflang, OLD.hreflang_cluster)
       AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at
    THEN
        NEW.updated_at := now();
    END IF;
    IF (NEW.site, NEW.section, NEW.loc, NEW.lastmod, NEW.changefreq, NEW.priority,
        NEW.images, NEW.videos, NEW.news, NEW.hreflang, NEW.hreflang_cluster, NEW.updated_at,
        NEW.visible_from, NEW.visible_until)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority,
        OLD.images, OLD.videos, OLD.news, OLD.hreflang, OLD.hreflang_cluster, OLD.updated_at,
        OLD.visible_from, OLD.visible_until)
    THEN
        NEW.change_xid := pg_current_xact_id();
    ELSIF NEW.change_xid IS DISTINCT FROM pg_current_xact_id() THEN
        NEW.change_xid := OLD.change_xid;
    END IF;
    RETURN NEW;
END $$;


--
-- Name: FUNCTION sitemap_urls_before_update(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_urls_before_update() IS 'Before UPDATE: refuses a change of id; sets updated_at when what the row serves changed and the write did not set it; marks a real change with the writer''s transaction (change_xid), and keeps the old mark on an UPDATE that changes nothing, so it touches no page. A write that sets change_xid to its own transaction has the row folded again.';


--
-- Name: sitemap_urls_mark_inserted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_urls_mark_inserted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE sitemap_urls SET change_xid = pg_current_xact_id() WHERE id = NEW.id;
    RETURN NULL;
END $$;


--
-- Name: FUNCTION sitemap_urls_mark_inserted(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_urls_mark_inserted() IS 'After INSERT, for rows that arrived with a change_xid of their own (a copy from a backup, say): marks them with the writer''s transaction, so folds see them. Rows that take the default never reach it (the trigger''s WHEN clause).';


--
-- Name: sitemap_urls_refuse_moving_sites(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_urls_refuse_moving_sites() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    refused sitemap_site_moves;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sitemap_site_moves WHERE refuses_writes)
       OR current_setting('sitemapd.move', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT m.* INTO refused FROM sitemap_site_moves m
        WHERE m.refuses_writes AND m.site IN (SELECT site FROM new_rows) LIMIT 1;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT m.* INTO refused FROM sitemap_site_moves m
        WHERE m.refuses_writes
          AND m.site IN (SELECT site FROM new_rows UNION SELECT site FROM old_rows) LIMIT 1;
    ELSE
        SELECT m.* INTO refused FROM sitemap_site_moves m
        WHERE m.refuses_writes AND m.site IN (SELECT site FROM old_rows) LIMIT 1;
    END IF;
    IF refused.site IS NULL THEN
        RETURN NULL;
    END IF;
    IF refused.direction = 'in' THEN
        RAISE EXCEPTION 'site % is arriving from another cell (%): its writes are refused until the copy is verified', refused.site, refused.other_cell
            USING ERRCODE = 'SD001', HINT = 'retry in a few seconds, through the proxy';
    ELSIF refused.verified_at IS NULL THEN
        RAISE EXCEPTION 'site % is moving to another cell (%): its writes are refused during the switch', refused.site, refused.other_cell
            USING ERRCODE = 'SD001', HINT = 'retry in a few seconds, through the proxy';
    ELSE
        RAISE EXCEPTION 'site % has moved to another cell (%): write to that cell', refused.site, refused.other_cell
            USING ERRCODE = 'SD001', HINT = 'the proxy sends the site to its new cell';
    END IF;
END $$;


--
-- Name: FUNCTION sitemap_urls_refuse_moving_sites(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_urls_refuse_moving_sites() IS 'After each INSERT, UPDATE or DELETE of sitemap_urls, once per statement: refuses it (SQLSTATE SD001, naming the site and the other cell) when it wrote a row of a site whose writes sitemap_site_moves refuses. The move''s own statements pass (setting sitemapd.move = on).';


--
-- Name: sitemap_video_bytes(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_video_bytes(video jsonb) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    tags integer := 0;
    -- each platform and a space after it: one space too many, when any
    platforms integer := 0;
BEGIN
    FOR i IN 0 .. coalesce(jsonb_array_length(video -> 'tags'), 0) - 1 LOOP
        tags := tags + coalesce(octet_length('<video:tag></video:tag>')
                                + sitemap_text_bytes(video -> 'tags' ->> i), 0);
    END LOOP;
    FOR i IN 0 .. coalesce(jsonb_array_length(video #> '{platform,platforms}'), 0) - 1 LOOP
        platforms := platforms + coalesce(octet_length(video #> '{platform,platforms}' ->> i) + 1, 0);
    END LOOP;
    RETURN octet_length('<video:video></video:video>')
        + octet_length('<video:thumbnail_loc></video:thumbnail_loc>') + sitemap_url_bytes(video ->> 'thumbnail_loc')
        + octet_length('<video:title></video:title>') + sitemap_text_bytes(video ->> 'title')
        + octet_length('<video:description></video:description>') + sitemap_text_bytes(video ->> 'description')
        + coalesce(octet_length('<video:content_loc></video:content_loc>') + sitemap_url_bytes(video ->> 'content_loc'), 0)
        + coalesce(octet_length('<video:player_loc></video:player_loc>') + sitemap_url_bytes(video ->> 'player_loc'), 0)
        + CASE WHEN video ? 'duration' THEN octet_length('<video:duration></video:duration>') + 5 ELSE 0 END
        + coalesce(octet_length('<video:expiration_date></video:expiration_date>') + octet_length(video ->> 'expiration_date'), 0)
        + CASE WHEN video ? 'rating' THEN octet_length('<video:rating></video:rating>') + 5 ELSE 0 END
        + coalesce(octet_length('<video:view_count></video:view_count>') + octet_length(video ->> 'view_count'), 0)
        + coalesce(octet_length('<video:publication_date></video:publication_date>') + octet_length(video ->> 'publication_date'), 0)
        + tags
        + CASE WHEN video ? 'family_friendly' THEN octet_length('<video:family_friendly></video:family_friendly>') + 3 ELSE 0 END
        + CASE WHEN video ? 'restriction'
               THEN octet_length('<video:restriction relationship="allow"></video:restriction>')
                    + greatest(0, 3 * jsonb_array_length(video #> '{restriction,countries}') - 1)
               ELSE 0 END
        + CASE WHEN video ? 'requires_subscription'
               THEN octet_length('<video:requires_subscription></video:requires_subscription>') + 3 ELSE 0 END
        + CASE WHEN video ? 'uploader'
               THEN octet_length('<video:uploader></video:uploader>') + sitemap_text_bytes(video #>> '{uploader,name}')
                    + coalesce(octet_length(' info=""') + sitemap_url_bytes(video #>> '{uploader,info}'), 0)
               ELSE 0 END
        + CASE WHEN video ? 'platform'
               THEN octet_length('<video:platform relationship="allow"></video:platform>') + greatest(platforms - 1, 0)
               ELSE 0 END
        + CASE WHEN video ? 'live' THEN octet_length('<video:live></video:live>') + 3 ELSE 0 END;
END $$;


--
-- Name: FUNCTION sitemap_video_bytes(video jsonb); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_video_bytes(video jsonb) IS 'The most bytes one video''s element takes: tags as written, values at their longest where the writer formats them (a duration 5 bytes, a rating 5, yes / no 3).';


--
-- Name: sitemap_w3c_datetime(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_w3c_datetime(value text) RETURNS timestamp with time zone
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
BEGIN
    IF value ~ '^\d{4}-\d{2}-\d{2}$' THEN
        RETURN (value || 'T00:00:00+00:00')::timestamptz;
    ELSIF value ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$' THEN
        RETURN value::timestamptz;
    END IF;
    RETURN NULL;
EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
    RETURN NULL;
END $_$;


--
-- Name: FUNCTION sitemap_w3c_datetime(value text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_w3c_datetime(value text) IS 'A date, or a date and time to the second with a zone: the W3C datetimes that are also XML Schema dates and dateTimes, which crawlers validate the extensions against. Returns the instant (a date alone is midnight UTC), or NULL.';


--
-- Name: sitemap_window_reason(timestamp with time zone, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_window_reason(visible_from timestamp with time zone, visible_until timestamp with time zone, moment timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN visible_from > moment THEN 'not-yet-visible'
                WHEN visible_until <= moment THEN 'no-longer-visible' END
$$;


--
-- Name: FUNCTION sitemap_window_reason(visible_from timestamp with time zone, visible_until timestamp with time zone, moment timestamp with time zone); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_window_reason(visible_from timestamp with time zone, visible_until timestamp with time zone, moment timestamp with time zone) IS 'Why a row with this window is not listed at moment (not-yet-visible, no-longer-visible), or null when it is.';


--
-- Name: sitemap_write_out_feed(bigint, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sitemap_write_out_feed(after_id bigint, max_entries integer, OUT entries bigint, OUT through_id bigint) RETURNS record
    LANGUAGE sql
    AS $$
    WITH next AS (
        SELECT id, cardinality(locs) AS n,
               sum(cardinality(locs)) OVER (ORDER BY id) AS running
        FROM (SELECT id, locs FROM sitemap_change_stash
              WHERE id > after_id ORDER BY id LIMIT max_entries) s
    ), chosen AS (
        SELECT id, running - n AS before, running FROM next WHERE running - n < max_entries
    ), block AS (
        SELECT setval('sitemap_changes_seq_seq', nextval('sitemap_changes_seq_seq') + total - 1)
               - total + 1 AS first
        FROM (SELECT max(running) AS total FROM chosen) c
        WHERE total IS NOT NULL
    ), taken AS (
        DELETE FROM sitemap_change_stash c USING chosen
        WHERE c.id = chosen.id
        RETURNING c.site, c.change, c.committed_at, c.locs, chosen.before
    ), written AS (
        INSERT INTO sitemap_changes (seq, site, loc, change, committed_at) OVERRIDING SYSTEM VALUE
        SELECT b.first + t.before + l.n - 1, t.site, l.loc, t.change, t.committed_at
        FROM block b CROSS JOIN taken t
        CROSS JOIN LATERAL unnest(t.locs) WITH ORDINALITY AS l(loc, n)
    )
    SELECT coalesce(max(running), 0), max(id) FROM chosen
$$;


--
-- Name: FUNCTION sitemap_write_out_feed(after_id bigint, max_entries integer, OUT entries bigint, OUT through_id bigint); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.sitemap_write_out_feed(after_id bigint, max_entries integer, OUT entries bigint, OUT through_id bigint) IS 'Writes the rows of sitemap_change_stash after after_id out to sitemap_changes, in order, oldest first, up to max_entries entries (one row at least); returns how many entries, and the last row written (null when none was), after which the next call goes on. The entries take one block of seqs, reserved at once, in the order of their kept rows and of the locs in each. Run by one writer at a time (it locks sitemap_feed_writer first): all of it or none, never ahead of an older row.';


--
-- Name: sitemap_audit_changes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_audit_changes (
    site text NOT NULL
);


--
-- Name: TABLE sitemap_audit_changes; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_audit_changes IS 'Sites whose audit or audit_leave_out changed: the next fold places again the rows whose verdict the change turned (sitemap_apply_audit_changes).';


--
-- Name: sitemap_audit_finding_counts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_audit_finding_counts (
    site text NOT NULL,
    finding text NOT NULL,
    urls bigint NOT NULL
);


--
-- Name: TABLE sitemap_audit_finding_counts; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_audit_finding_counts IS 'How many audited URLs of each site have each finding (sitemap_audits), kept by its triggers; a finding with none has no row.';


--
-- Name: sitemap_audits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_audits (
    id bigint NOT NULL,
    site text NOT NULL,
    loc text NOT NULL,
    row_updated_at timestamp with time zone NOT NULL,
    checked_at timestamp with time zone NOT NULL,
    status integer,
    location text,
    noindex boolean NOT NULL,
    canonical text,
    finding text NOT NULL,
    detail text,
    CONSTRAINT sitemap_audits_finding_check CHECK ((finding = ANY (ARRAY['ok'::text, 'redirect'::text, 'not-found'::text, 'gone'::text, 'noindex'::text, 'canonical-elsewhere'::text, 'error'::text])))
);


--
-- Name: TABLE sitemap_audits; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_audits IS 'The last check of each audited URL (id is the row''s): the loc fetched and the row''s updated_at then (a change of either has it checked again), when, the status, a redirect''s Location, whether it said noindex, the canonical it named, and the finding: ok, redirect, not-found, gone, noindex, canonical-elsewhere, or error (any other status, or no answer within 10 s; detail says which). Written by the auditor alone.';


--
-- Name: sitemap_change_stash; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_change_stash (
    id bigint NOT NULL,
    site text NOT NULL,
    change text NOT NULL,
    committed_at timestamp with time zone NOT NULL,
    locs text[] NOT NULL,
    CONSTRAINT sitemap_change_stash_change_check CHECK ((change = ANY (ARRAY['added'::text, 'updated'::text, 'removed'::text])))
);
ALTER TABLE ONLY public.sitemap_change_stash ALTER COLUMN locs SET STORAGE EXTERNAL;


--
-- Name: TABLE sitemap_change_stash; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_change_stash IS 'Feed entries a fold of many rows or many removals (10,000 or more) kept for the service to write out apart, so the fold''s transaction stays short: locs[i] is one entry, written to sitemap_changes in (id, i) order by sitemap_write_out_feed. While any are kept, every fold keeps its entries here too, so the feed stays in fold order.';


--
-- Name: sitemap_change_stash_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_change_stash ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.sitemap_change_stash_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: sitemap_changes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_changes (
    seq bigint NOT NULL,
    site text NOT NULL,
    loc text NOT NULL,
    change text NOT NULL,
    committed_at timestamp with time zone NOT NULL,
    CONSTRAINT sitemap_changes_change_check CHECK ((change = ANY (ARRAY['added'::text, 'updated'::text, 'removed'::text])))
);


--
-- Name: TABLE sitemap_changes; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_changes IS 'The change feed, oldest first: each URL added, updated or removed, with its fold''s commit time. Read-only for applications; pruned by the service (change_log_retention, change_log_max_rows).';


--
-- Name: sitemap_changes_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_changes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.sitemap_changes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: sitemap_clusters; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_clusters (
    cluster text NOT NULL,
    hreflangs text[] NOT NULL,
    hrefs text[] NOT NULL,
    link_bytes integer NOT NULL,
    problem text
);


--
-- Name: TABLE sitemap_clusters; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_clusters IS 'The hreflang clusters as served, rebuilt by folds from the rows that name them: every member lists every member, itself included, so no link is one-way. A cluster with a problem is served without links, and the problem is reported.';


--
-- Name: sitemap_crawler_hours; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_crawler_hours (
    site text NOT NULL,
    crawler text NOT NULL,
    hour timestamp with time zone NOT NULL,
    fetches bigint NOT NULL,
    CONSTRAINT sitemap_crawler_hours_fetches_check CHECK ((fetches >= 1)),
    CONSTRAINT sitemap_crawler_hours_hour_check CHECK ((date_trunc('hour'::text, hour) = hour))
);


--
-- Name: TABLE sitemap_crawler_hours; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_crawler_hours IS 'Fetches of a site''s sitemap files per hour and crawler, kept 30 days (pruned by the service), for the operators'' plot.';


--
-- Name: sitemap_crawler_ledger; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_crawler_ledger (
    site text NOT NULL,
    file text NOT NULL,
    crawler text NOT NULL,
    verified boolean NOT NULL,
    first_fetch timestamp with time zone NOT NULL,
    last_fetch timestamp with time zone NOT NULL,
    last_status integer NOT NULL,
    served_version timestamp with time zone,
    fetches bigint NOT NULL,
    bytes bigint NOT NULL,
    CONSTRAINT sitemap_crawler_ledger_bytes_check CHECK ((bytes >= 0)),
    CONSTRAINT sitemap_crawler_ledger_check CHECK ((first_fetch <= last_fetch)),
    CONSTRAINT sitemap_crawler_ledger_check1 CHECK ((verified = (crawler <> ALL (ARRAY['other'::text, 'unverified'::text])))),
    CONSTRAINT sitemap_crawler_ledger_crawler_check CHECK (((crawler ~ '^[a-z][a-z0-9-]*$'::text) AND (length(crawler) <= 32))),
    CONSTRAINT sitemap_crawler_ledger_fetches_check CHECK ((fetches >= 1)),
    CONSTRAINT sitemap_crawler_ledger_last_status_check CHECK (((last_status >= 100) AND (last_status <= 599)))
);


--
-- Name: TABLE sitemap_crawler_ledger; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_crawler_ledger IS 'Each sitemap file (index files, pages, news) of a site as each crawler took it: the first and last fetch, the last status, the version the last fetch served (its lastmod: current while it equals the file''s), fetches and bytes sent. crawler is a verified family (googlebot, bingbot, yandex, applebot, duckduckbot, baiduspider, petalbot, seznambot, yeti), unverified (a crawler''s user agent from an address not verified as its own) or other. Written by the service alone.';


--
-- Name: sitemap_feed_writer; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_feed_writer (
    singleton boolean DEFAULT true NOT NULL,
    CONSTRAINT sitemap_feed_writer_singleton_check CHECK (singleton)
);


--
-- Name: TABLE sitemap_feed_writer; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_feed_writer IS 'One row whose lock is the turn to write out sitemap_change_stash: one writer at a time across replicas.';


--
-- Name: sitemap_fold_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_fold_state (
    singleton boolean DEFAULT true NOT NULL,
    folded_through pg_snapshot NOT NULL,
    folded_at timestamp with time zone NOT NULL,
    folding_through pg_snapshot,
    read_through_xid xid8,
    read_through_id bigint,
    lane_through pg_snapshot,
    pass_placed_through bigint,
    windows_through timestamp with time zone DEFAULT now() NOT NULL,
    removals_left boolean DEFAULT false NOT NULL,
    CONSTRAINT sitemap_fold_state_lane_in_a_pass CHECK (((folding_through IS NOT NULL) OR ((lane_through IS NULL) AND (pass_placed_through IS NULL)))),
    CONSTRAINT sitemap_fold_state_pass_whole CHECK ((((folding_through IS NULL) = (read_through_xid IS NULL)) AND ((folding_through IS NULL) = (read_through_id IS NULL)))),
    CONSTRAINT sitemap_fold_state_singleton_check CHECK (singleton)
);


--
-- Name: TABLE sitemap_fold_state; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_fold_state IS 'One row: the snapshot the last fold read with, and the pass under way (its snapshot and the last row it read). Locked by every fold and every configuration change, which makes them take turns across replicas.';


--
-- Name: COLUMN sitemap_fold_state.lane_through; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_fold_state.lane_through IS 'While a pass runs: the snapshot through which lanes folded what committed after the pass''s snapshot; the next pass begins there. Once set, the pass reads no transaction past read_through_xid: the first lane folded those.';


--
-- Name: COLUMN sitemap_fold_state.pass_placed_through; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_fold_state.pass_placed_through IS 'While a pass runs: the newest placed row id when it began; rows the pass reads past it have no placement.';


--
-- Name: COLUMN sitemap_fold_state.windows_through; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_fold_state.windows_through IS 'The moment through which folds have moved the rows whose visibility window opened or closed.';


--
-- Name: COLUMN sitemap_fold_state.removals_left; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_fold_state.removals_left IS 'The last fold took as many removals as it may and may have left some: the next reads no changed row until none is left.';


--
-- Name: sitemap_indexnow_cursors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_indexnow_cursors (
    site text NOT NULL,
    delivered_through bigint NOT NULL,
    delivered_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: TABLE sitemap_indexnow_cursors; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_indexnow_cursors IS 'How far each site''s IndexNow push has gone in the change feed: the last entry of the last batch the endpoint accepted or refused for good. Created at the feed''s end the first time a site has a key, so old changes are never back-filled. A replica sends only while it holds its site''s row locked.';


--
-- Name: sitemap_lastmod_clamp_counts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_lastmod_clamp_counts (
    site text NOT NULL,
    section text NOT NULL,
    clamps bigint NOT NULL
);


--
-- Name: TABLE sitemap_lastmod_clamp_counts; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_lastmod_clamp_counts IS 'How many rows of each site and section have a lastmod clamp (sitemap_lastmod_clamps), kept by its triggers; a section with none has no row.';


--
-- Name: sitemap_lastmod_clamps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_lastmod_clamps (
    id bigint NOT NULL,
    site text NOT NULL,
    section text NOT NULL,
    written_lastmod timestamp with time zone NOT NULL,
    served_lastmod timestamp with time zone NOT NULL
);


--
-- Name: TABLE sitemap_lastmod_clamps; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_lastmod_clamps IS 'Rows whose lastmod was in the future when a fold placed them: served with served_lastmod (that fold''s time) while their lastmod is still written_lastmod. Written by folds alone (sitemap_fold_clamp_lastmods); counted as lastmod-in-future in stats, the HTML view and the metrics.';


--
-- Name: sitemap_news_files; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_news_files (
    site text NOT NULL,
    file integer NOT NULL,
    url_count integer NOT NULL,
    lastmod timestamp with time zone NOT NULL,
    digest text NOT NULL,
    listed boolean NOT NULL,
    CONSTRAINT sitemap_news_files_file_check CHECK ((file >= 1)),
    CONSTRAINT sitemap_news_files_url_count_check CHECK ((url_count >= 0))
);


--
-- Name: TABLE sitemap_news_files; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_news_files IS 'One summary per news file of a site: its articles'' count, digest and lastmod (new when its articles change). Every statement that changes it notifies sitemapd_pages.';


--
-- Name: sitemap_news_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_news_state (
    singleton boolean DEFAULT true NOT NULL,
    due timestamp with time zone NOT NULL,
    CONSTRAINT sitemap_news_state_singleton_check CHECK (singleton)
);


--
-- Name: TABLE sitemap_news_state; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_news_state IS 'One row: when the news files must be listed again at the latest, because the next article leaves the window then (''infinity'': none is in it).';


--
-- Name: sitemap_news_windows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_news_windows (
    site text NOT NULL,
    window_end timestamp with time zone NOT NULL,
    per_file integer NOT NULL,
    CONSTRAINT sitemap_news_windows_per_file_check CHECK ((per_file >= 1))
);


--
-- Name: TABLE sitemap_news_windows; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_news_windows IS 'Each site with news records: the window its news files were last listed for, and how many articles a file holds.';


--
-- Name: sitemap_pages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_pages (
    site text NOT NULL,
    section text NOT NULL,
    page integer NOT NULL,
    url_count integer NOT NULL,
    bytes bigint NOT NULL,
    lastmod timestamp with time zone NOT NULL,
    images bigint DEFAULT 0 NOT NULL,
    videos bigint DEFAULT 0 NOT NULL,
    alternates bigint DEFAULT 0 NOT NULL,
    CONSTRAINT sitemap_pages_bytes_check CHECK ((bytes >= 0)),
    CONSTRAINT sitemap_pages_page_check CHECK ((page >= 1)),
    CONSTRAINT sitemap_pages_url_count_check CHECK ((url_count >= 0))
);


--
-- Name: TABLE sitemap_pages; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_pages IS 'One summary per page: URLs, bytes, extension entries and lastmod. The sitemap index and a page''s validators are read from here alone. Written by folds; every statement that changes it notifies sitemapd_pages.';


--
-- Name: sitemap_placement_runs_run_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_placement_runs ALTER COLUMN run ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.sitemap_placement_runs_run_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: sitemap_removals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_removals (
    id bigint,
    site text,
    loc text
);


--
-- Name: TABLE sitemap_removals; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_removals IS 'URLs that left sitemap_urls or became another URL, written by its triggers for the next fold; a row with a NULL id says the table was truncated.';


--
-- Name: sitemap_robots_changes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_robots_changes (
    site text NOT NULL
);


--
-- Name: TABLE sitemap_robots_changes; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_robots_changes IS 'Sites whose locs must be judged again: the robots.txt their host serves, or their robots_check or robots_check_agents, changed. The next fold judges their placed rows again and moves only those whose verdict changed.';


--
-- Name: sitemap_settings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_settings (
    singleton boolean DEFAULT true NOT NULL,
    max_urls integer NOT NULL,
    entry_budget bigint NOT NULL,
    CONSTRAINT sitemap_settings_entry_budget_check CHECK ((entry_budget > 0)),
    CONSTRAINT sitemap_settings_max_urls_check CHECK (((max_urls >= 1) AND (max_urls <= 50000))),
    CONSTRAINT sitemap_settings_singleton_check CHECK (singleton)
);


--
-- Name: TABLE sitemap_settings; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_settings IS 'The page limits, one row, written by the service from its configuration at start-up (sitemap_configure_limits): most URLs a page holds, and the bytes its entries may take.';


--
-- Name: sitemap_site_changes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_site_changes (
    site text NOT NULL
);


--
-- Name: TABLE sitemap_site_changes; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_site_changes IS 'Sites created, or whose base URL changed, since the last fold: the next fold places their rows again (sitemap_apply_site_changes).';


--
-- Name: sitemap_site_moves; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_site_moves (
    site text NOT NULL,
    direction text NOT NULL,
    other_cell text NOT NULL,
    refuses_writes boolean NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    verified_at timestamp with time zone,
    CONSTRAINT sitemap_site_moves_direction_value CHECK ((direction = ANY (ARRAY['out'::text, 'in'::text])))
);


--
-- Name: TABLE sitemap_site_moves; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_site_moves IS 'Sites moving to or from another cell (`sitemapd sites move`), one row each. direction ''out'': the site leaves this cell; its writes are refused from the final catch-up on (refuses_writes), and for good once the move is verified (verified_at), so they go to the new cell. direction ''in'': the site arrives; its writes are refused until the copy is verified, when the row is deleted. other_cell names the other database (its URL without a password). `sitemapd sites move NAME --abort` deletes both rows.';


--
-- Name: sitemap_site_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_site_tokens (
    digest text NOT NULL,
    site text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sitemap_site_tokens_digest_check CHECK ((digest ~ '^sha256:[0-9a-f]{64}$'::text))
);


--
-- Name: TABLE sitemap_site_tokens; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_site_tokens IS 'The write API''s site tokens: each may read and write only its site''s URLs, stats and HTML view details. Only the token''s SHA-256 digest is kept (sha256: and 64 lower-case hex digits, as `sitemapd token` prints it). A deleted row, or its site''s, revokes it on every replica at once.';


--
-- Name: sitemap_sites; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_sites (
    site text NOT NULL,
    origin text NOT NULL,
    path_prefix text NOT NULL,
    host text GENERATED ALWAYS AS (public.sitemap_origin_host(origin)) STORED,
    robots_txt text,
    include_subfolder_sites boolean DEFAULT false NOT NULL,
    indexnow_key text,
    index_format text DEFAULT 'xml'::text NOT NULL,
    nested_index boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    robots_check text DEFAULT 'leave-out'::text NOT NULL,
    robots_check_agents text[] DEFAULT '{*,googlebot,bingbot}'::text[] NOT NULL,
    audit boolean DEFAULT false NOT NULL,
    audit_origin text,
    audit_requests_per_second double precision DEFAULT 2 NOT NULL,
    audit_user_agent text,
    audit_interval interval DEFAULT '30 days'::interval NOT NULL,
    audit_leave_out text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT sitemap_sites_audit_interval_length CHECK ((audit_interval >= '00:01:00'::interval)),
    CONSTRAINT sitemap_sites_audit_leave_out_findings CHECK ((audit_leave_out <@ ARRAY['redirect'::text, 'not-found'::text, 'gone'::text, 'noindex'::text, 'canonical-elsewhere'::text])),
    CONSTRAINT sitemap_sites_audit_origin_form CHECK (((audit_origin ~ '^https?://[^/?#@[:space:]]+$'::text) AND (audit_origin = lower(audit_origin)))),
    CONSTRAINT sitemap_sites_audit_rate CHECK (((audit_requests_per_second > (0)::double precision) AND (audit_requests_per_second <= (10000)::double precision))),
    CONSTRAINT sitemap_sites_audit_user_agent_text CHECK (((audit_user_agent ~ '^[ -~]+$'::text) AND (length(audit_user_agent) <= 256))),
    CONSTRAINT sitemap_sites_index_format_value CHECK ((index_format = ANY (ARRAY['xml'::text, 'xml.gz'::text]))),
    CONSTRAINT sitemap_sites_indexnow_key_rule CHECK ((indexnow_key ~ '^[A-Za-z0-9-]{8,128}$'::text)),
    CONSTRAINT sitemap_sites_origin_form CHECK (((origin ~ '^https?://[^/?#@[:space:]]+$'::text) AND (origin = lower(origin)))),
    CONSTRAINT sitemap_sites_path_prefix_check CHECK (((path_prefix ~~ '/%'::text) AND (path_prefix ~~ '%/'::text))),
    CONSTRAINT sitemap_sites_robots_check_agents_rule CHECK (public.sitemap_check_robots_agents(robots_check_agents)),
    CONSTRAINT sitemap_sites_robots_check_value CHECK ((robots_check = ANY (ARRAY['leave-out'::text, 'report'::text, 'off'::text]))),
    CONSTRAINT sitemap_sites_robots_txt_size CHECK ((octet_length(robots_txt) <= 512000)),
    CONSTRAINT sitemap_sites_site_slug CHECK (((site ~ '^[a-z0-9][a-z0-9_-]*$'::text) AND (octet_length(site) <= 64)))
);


--
-- Name: TABLE sitemap_sites; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_sites IS 'The sites the service serves, one row each, written by the write API (/api/v1/sites), `sitemapd sites`, plain SQL, or the configuration file at start (which wins for the sites it names). Every change is announced on channel sitemapd_sites and taken up by every replica at once. A loc must lie under its site''s origin and path prefix to be served.';


--
-- Name: COLUMN sitemap_sites.site; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.site IS 'The site''s name, a slug (a-z, 0-9, _ and -, starting with a letter or digit, at most 64 bytes): what sitemap_urls.site refers to.';


--
-- Name: COLUMN sitemap_sites.origin; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.origin IS 'scheme://host[:port] of the base URL, lower case, default port left out.';


--
-- Name: COLUMN sitemap_sites.path_prefix; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.path_prefix IS 'The base URL''s path, starting and ending with /. origin || path_prefix is the base URL.';


--
-- Name: COLUMN sitemap_sites.host; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.host IS 'The origin''s host without port (generated). No two sites share host and path_prefix.';


--
-- Name: COLUMN sitemap_sites.robots_txt; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.robots_txt IS 'The operator''s robots.txt for the site''s host, at most 512,000 bytes (what Google reads); null for none.';


--
-- Name: COLUMN sitemap_sites.include_subfolder_sites; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.include_subfolder_sites IS 'Whether the site''s index also lists the pages of the sites under its base URL, on its scheme and host.';


--
-- Name: COLUMN sitemap_sites.indexnow_key; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.indexnow_key IS 'The site''s IndexNow key (8 to 128 of a-z A-Z 0-9 -), served at /{key}.txt; changes are pushed while it is set.';


--
-- Name: COLUMN sitemap_sites.index_format; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.index_format IS '''xml'' or ''xml.gz'': which name of the index robots.txt announces.';


--
-- Name: COLUMN sitemap_sites.nested_index; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.nested_index IS 'Whether an index split in several files is served as an index of them.';


--
-- Name: COLUMN sitemap_sites.updated_at; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.updated_at IS 'When the row last changed (set by sitemap_sites_before_update).';


--
-- Name: COLUMN sitemap_sites.robots_check; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.robots_check IS 'What a loc its host''s robots.txt disallows (for any of robots_check_agents) becomes: ''leave-out'' (left out, reason robots-disallowed), ''report'' (listed and reported), or ''off'' (not checked).';


--
-- Name: COLUMN sitemap_sites.robots_check_agents; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.robots_check_agents IS 'The user agents each loc is checked for, as robots.txt groups name them.';


--
-- Name: COLUMN sitemap_sites.audit; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.audit IS 'Whether the site''s URLs are fetched from the live site and what they answer kept in sitemap_audits.';


--
-- Name: COLUMN sitemap_sites.audit_origin; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.audit_origin IS 'scheme://host[:port] the audit fetches through instead of the site''s origin (an internal address); null: the site''s own.';


--
-- Name: COLUMN sitemap_sites.audit_requests_per_second; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.audit_requests_per_second IS 'The most requests a second the audit sends the site.';


--
-- Name: COLUMN sitemap_sites.audit_user_agent; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.audit_user_agent IS 'The User-Agent of the audit''s requests; null: sitemapd-audit/VERSION.';


--
-- Name: COLUMN sitemap_sites.audit_interval; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.audit_interval IS 'How long an unchanged URL''s check holds before it is fetched again.';


--
-- Name: COLUMN sitemap_sites.audit_leave_out; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_sites.audit_leave_out IS 'Findings that leave a URL out of the sitemaps until a later check passes; empty: report only.';


--
-- Name: sitemap_submissions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_submissions (
    site text NOT NULL,
    template text NOT NULL,
    submitted_version timestamp with time zone,
    attempted_at timestamp with time zone
);


--
-- Name: TABLE sitemap_submissions; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_submissions IS 'Each site''s index, submitted by GET to each submit_urls template: the index version (its newest page lastmod) the last 200 answer was for, and when the last try was.';


--
-- Name: sitemap_unplaced; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_unplaced (
    id bigint NOT NULL
);


--
-- Name: TABLE sitemap_unplaced; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_unplaced IS 'Rows a configuration change took off their page (limits lowered, a base URL changed), for the next fold to place again.';


--
-- Name: sitemap_urls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sitemap_urls (
    id bigint NOT NULL,
    site text DEFAULT 'default'::text NOT NULL,
    section text DEFAULT ''::text NOT NULL,
    loc text NOT NULL,
    lastmod timestamp with time zone,
    changefreq text,
    priority real,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    change_xid xid8 DEFAULT pg_current_xact_id(),
    images jsonb,
    videos jsonb,
    news jsonb,
    hreflang text[],
    hreflang_cluster text,
    visible_from timestamp with time zone,
    visible_until timestamp with time zone,
    CONSTRAINT sitemap_urls_changefreq_value CHECK ((changefreq = ANY (ARRAY['always'::text, 'hourly'::text, 'daily'::text, 'weekly'::text, 'monthly'::text, 'yearly'::text, 'never'::text]))),
    CONSTRAINT sitemap_urls_priority_range CHECK (((priority >= (0)::double precision) AND (priority <= (1)::double precision))),
    CONSTRAINT sitemap_urls_section_slug CHECK (((section = ''::text) OR ((section ~ '^[a-z0-9][a-z0-9_-]*$'::text) AND (octet_length(section) <= 64)))),
    CONSTRAINT sitemap_urls_site_slug CHECK (((site ~ '^[a-z0-9][a-z0-9_-]*$'::text) AND (octet_length(site) <= 64)))
);


--
-- Name: TABLE sitemap_urls; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.sitemap_urls IS 'The page records applications write with plain SQL, in transactions of their own that never wait for sitemapd. CHECK constraints refuse what no sitemap may hold, naming the constraint. Folds place each committed row on a page of its site''s section for good (sitemap_placed). The other sitemap_* tables belong to sitemapd; sitemap_changes is there to be read.';


--
-- Name: COLUMN sitemap_urls.id; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.id IS 'Managed by sitemapd: fixed for the row''s life (sitemap_urls_before_update refuses a change). Rows are placed in id order.';


--
-- Name: COLUMN sitemap_urls.site; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.site IS 'The site the URL belongs to (a slug). A row of a site that is not configured is left out of every sitemap, with a reason.';


--
-- Name: COLUMN sitemap_urls.section; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.section IS ''''' for the default section, else a slug served as sitemap-{section}-N.';


--
-- Name: COLUMN sitemap_urls.loc; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.loc IS 'An absolute http(s) URL, unique per site, at most 2,048 characters as served (each non-ASCII byte as %XX). A loc outside its site''s base URL is left out, with a reason.';


--
-- Name: COLUMN sitemap_urls.lastmod; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.lastmod IS 'When the page''s content last changed; served in UTC. A page''s lastmod in the index derives from its rows''.';


--
-- Name: COLUMN sitemap_urls.changefreq; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.changefreq IS 'always, hourly, daily, weekly, monthly, yearly or never.';


--
-- Name: COLUMN sitemap_urls.priority; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.priority IS '0.0 to 1.0, served with at most three decimals.';


--
-- Name: COLUMN sitemap_urls.updated_at; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.updated_at IS 'Set to now() by every UPDATE that changes what the row serves.';


--
-- Name: COLUMN sitemap_urls.change_xid; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.change_xid IS 'Managed by sitemapd: the transaction that last changed the row, which tells folds what is new. Whatever a write gives is replaced by the writer''s own transaction; an UPDATE that sets it to pg_current_xact_id() has the row folded again.';


--
-- Name: COLUMN sitemap_urls.images; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.images IS 'Image sitemap extension: a JSON array of {"loc": URL}, checked by sitemap_check_images.';


--
-- Name: COLUMN sitemap_urls.videos; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.videos IS 'Video sitemap extension: a JSON array of video objects, checked by sitemap_check_videos.';


--
-- Name: COLUMN sitemap_urls.news; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.news IS 'News sitemap extension: a JSON object (publication, publication_date, title), checked by sitemap_check_news. Rows with news are listed in the site''s news sitemap while published within its window.';


--
-- Name: COLUMN sitemap_urls.hreflang; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.hreflang IS 'The languages this URL stands for in its cluster (ISO 639-1, optional region, or x-default); set together with hreflang_cluster.';


--
-- Name: COLUMN sitemap_urls.hreflang_cluster; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.hreflang_cluster IS 'The name of the group of URLs that are translations of one another; every member links every member (sitemap_clusters).';


--
-- Name: COLUMN sitemap_urls.visible_from; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.visible_from IS 'When the row enters the sitemaps (null: it is listed from its first fold). Folds move it within a fold''s interval of the moment; IndexNow is sent its URL then.';


--
-- Name: COLUMN sitemap_urls.visible_until; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.sitemap_urls.visible_until IS 'When the row leaves the sitemaps (null: never); later than visible_from. The row stays in the table, left out as no-longer-visible.';


--
-- Name: sitemap_urls_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.sitemap_urls_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: sitemap_audit_changes sitemap_audit_changes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_audit_changes
    ADD CONSTRAINT sitemap_audit_changes_pkey PRIMARY KEY (site);


--
-- Name: sitemap_audit_finding_counts sitemap_audit_finding_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_audit_finding_counts
    ADD CONSTRAINT sitemap_audit_finding_counts_pkey PRIMARY KEY (site, finding);


--
-- Name: sitemap_audits sitemap_audits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_audits
    ADD CONSTRAINT sitemap_audits_pkey PRIMARY KEY (id);


--
-- Name: sitemap_change_stash sitemap_change_stash_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_change_stash
    ADD CONSTRAINT sitemap_change_stash_pkey PRIMARY KEY (id);


--
-- Name: sitemap_changes sitemap_changes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_changes
    ADD CONSTRAINT sitemap_changes_pkey PRIMARY KEY (seq);


--
-- Name: sitemap_clusters sitemap_clusters_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_clusters
    ADD CONSTRAINT sitemap_clusters_pkey PRIMARY KEY (cluster);


--
-- Name: sitemap_crawler_hours sitemap_crawler_hours_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_crawler_hours
    ADD CONSTRAINT sitemap_crawler_hours_pkey PRIMARY KEY (site, hour, crawler);


--
-- Name: sitemap_crawler_ledger sitemap_crawler_ledger_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_crawler_ledger
    ADD CONSTRAINT sitemap_crawler_ledger_pkey PRIMARY KEY (site, file, crawler);


--
-- Name: sitemap_feed_writer sitemap_feed_writer_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_feed_writer
    ADD CONSTRAINT sitemap_feed_writer_pkey PRIMARY KEY (singleton);


--
-- Name: sitemap_fold_state sitemap_fold_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_fold_state
    ADD CONSTRAINT sitemap_fold_state_pkey PRIMARY KEY (singleton);


--
-- Name: sitemap_indexnow_cursors sitemap_indexnow_cursors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_indexnow_cursors
    ADD CONSTRAINT sitemap_indexnow_cursors_pkey PRIMARY KEY (site);


--
-- Name: sitemap_lastmod_clamp_counts sitemap_lastmod_clamp_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_lastmod_clamp_counts
    ADD CONSTRAINT sitemap_lastmod_clamp_counts_pkey PRIMARY KEY (site, section);


--
-- Name: sitemap_lastmod_clamps sitemap_lastmod_clamps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_lastmod_clamps
    ADD CONSTRAINT sitemap_lastmod_clamps_pkey PRIMARY KEY (id);


--
-- Name: sitemap_news_files sitemap_news_files_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_news_files
    ADD CONSTRAINT sitemap_news_files_pkey PRIMARY KEY (site, file);


--
-- Name: sitemap_news_state sitemap_news_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_news_state
    ADD CONSTRAINT sitemap_news_state_pkey PRIMARY KEY (singleton);


--
-- Name: sitemap_news_windows sitemap_news_windows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_news_windows
    ADD CONSTRAINT sitemap_news_windows_pkey PRIMARY KEY (site);


--
-- Name: sitemap_pages sitemap_pages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_pages
    ADD CONSTRAINT sitemap_pages_pkey PRIMARY KEY (site, section, page);


--
-- Name: sitemap_placement_runs sitemap_placement_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_placement_runs
    ADD CONSTRAINT sitemap_placement_runs_pkey PRIMARY KEY (run);


--
-- Name: sitemap_placements sitemap_placements_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_placements
    ADD CONSTRAINT sitemap_placements_pkey PRIMARY KEY (id);


--
-- Name: sitemap_robots_changes sitemap_robots_changes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_robots_changes
    ADD CONSTRAINT sitemap_robots_changes_pkey PRIMARY KEY (site);


--
-- Name: sitemap_settings sitemap_settings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_settings
    ADD CONSTRAINT sitemap_settings_pkey PRIMARY KEY (singleton);


--
-- Name: sitemap_site_changes sitemap_site_changes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_site_changes
    ADD CONSTRAINT sitemap_site_changes_pkey PRIMARY KEY (site);


--
-- Name: sitemap_site_moves sitemap_site_moves_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_site_moves
    ADD CONSTRAINT sitemap_site_moves_pkey PRIMARY KEY (site);


--
-- Name: sitemap_site_tokens sitemap_site_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_site_tokens
    ADD CONSTRAINT sitemap_site_tokens_pkey PRIMARY KEY (digest);


--
-- Name: sitemap_sites sitemap_sites_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_sites
    ADD CONSTRAINT sitemap_sites_pkey PRIMARY KEY (site);


--
-- Name: sitemap_sites sitemap_sites_robots_txt_text; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_sites
    ADD CONSTRAINT sitemap_sites_robots_txt_text CHECK ((robots_txt !~ '[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]'::text)) NOT VALID;


--
-- Name: sitemap_submissions sitemap_submissions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_submissions
    ADD CONSTRAINT sitemap_submissions_pkey PRIMARY KEY (site, template);


--
-- Name: sitemap_unplaced sitemap_unplaced_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_unplaced
    ADD CONSTRAINT sitemap_unplaced_pkey PRIMARY KEY (id);


--
-- Name: sitemap_urls sitemap_urls_hreflang; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_hreflang CHECK ((((hreflang IS NULL) AND (hreflang_cluster IS NULL)) OR public.sitemap_check_hreflang(hreflang, hreflang_cluster))) NOT VALID;


--
-- Name: sitemap_urls sitemap_urls_images; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_images CHECK (((images IS NULL) OR public.sitemap_check_images(images))) NOT VALID;


--
-- Name: sitemap_urls sitemap_urls_loc_url; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_loc_url CHECK (((public.sitemap_served_chars(loc) <= 2048) AND (starts_with(loc, 'http://'::text) OR starts_with(loc, 'https://'::text)) AND (substr(loc, (strpos(loc, '//'::text) + 2), 1) <> ALL (ARRAY[''::text, '/'::text, '?'::text, '#'::text])) AND (loc !~ '[\x01-\x20\x7f]'::text))) NOT VALID;


--
-- Name: sitemap_urls sitemap_urls_news; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_news CHECK (((news IS NULL) OR public.sitemap_check_news(news))) NOT VALID;


--
-- Name: sitemap_urls sitemap_urls_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_pkey PRIMARY KEY (id);


--
-- Name: sitemap_urls sitemap_urls_site_loc_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_site_loc_key UNIQUE (site, loc);


--
-- Name: sitemap_urls sitemap_urls_videos; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_videos CHECK (((videos IS NULL) OR public.sitemap_check_videos(loc, videos))) NOT VALID;


--
-- Name: sitemap_urls sitemap_urls_window_order; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.sitemap_urls
    ADD CONSTRAINT sitemap_urls_window_order CHECK ((visible_from < visible_until)) NOT VALID;


--
-- Name: sitemap_audits_site_checked; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_audits_site_checked ON public.sitemap_audits USING btree (site, checked_at);


--
-- Name: sitemap_audits_site_finding; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_audits_site_finding ON public.sitemap_audits USING btree (site, finding);


--
-- Name: sitemap_changes_committed_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_changes_committed_idx ON public.sitemap_changes USING brin (committed_at);


--
-- Name: sitemap_clusters_problem_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_clusters_problem_idx ON public.sitemap_clusters USING btree (cluster) WHERE (problem IS NOT NULL);


--
-- Name: sitemap_lastmod_clamps_site; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_lastmod_clamps_site ON public.sitemap_lastmod_clamps USING btree (site, section);


--
-- Name: sitemap_pages_lastmod; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_pages_lastmod ON public.sitemap_pages USING btree (lastmod);


--
-- Name: sitemap_placement_runs_ids_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placement_runs_ids_idx ON public.sitemap_placement_runs USING gist (int8range(first_id, last_id, '[]'::text));


--
-- Name: sitemap_placement_runs_last_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placement_runs_last_idx ON public.sitemap_placement_runs USING btree (last_id);


--
-- Name: sitemap_placement_runs_page_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placement_runs_page_idx ON public.sitemap_placement_runs USING btree (site, section, page);


--
-- Name: sitemap_placements_cluster_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placements_cluster_idx ON public.sitemap_placements USING btree (cluster) WHERE (cluster IS NOT NULL);


--
-- Name: sitemap_placements_page_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placements_page_idx ON public.sitemap_placements USING btree (site, section, page, id) WHERE (page IS NOT NULL);


--
-- Name: sitemap_placements_robots_rule; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placements_robots_rule ON public.sitemap_placements USING btree (site, section) WHERE (robots_rule IS NOT NULL);


--
-- Name: sitemap_placements_skipped_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placements_skipped_idx ON public.sitemap_placements USING btree (site, skip_logged) WHERE (skip_reason IS NOT NULL);


--
-- Name: sitemap_placements_unreported_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_placements_unreported_idx ON public.sitemap_placements USING btree (id) WHERE ((skip_reason IS NOT NULL) AND (NOT skip_logged));


--
-- Name: sitemap_site_tokens_site; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_site_tokens_site ON public.sitemap_site_tokens USING btree (site);


--
-- Name: sitemap_sites_host_path; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX sitemap_sites_host_path ON public.sitemap_sites USING btree (host, path_prefix);


--
-- Name: sitemap_urls_change_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_urls_change_idx ON public.sitemap_urls USING btree (change_xid, id);


--
-- Name: sitemap_urls_cluster_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_urls_cluster_idx ON public.sitemap_urls USING btree (hreflang_cluster) WHERE (hreflang_cluster IS NOT NULL);


--
-- Name: sitemap_urls_news_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_urls_news_idx ON public.sitemap_urls USING btree (site, public.sitemap_news_published(news)) WHERE (news IS NOT NULL);


--
-- Name: sitemap_urls_visible_from; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_urls_visible_from ON public.sitemap_urls USING btree (visible_from) WHERE (visible_from IS NOT NULL);


--
-- Name: sitemap_urls_visible_until; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_urls_visible_until ON public.sitemap_urls USING btree (visible_until) WHERE (visible_until IS NOT NULL);


--
-- Name: sitemap_urls_windows; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sitemap_urls_windows ON public.sitemap_urls USING btree (id) INCLUDE (visible_from, visible_until) WHERE ((visible_from IS NOT NULL) OR (visible_until IS NOT NULL));


--
-- Name: sitemap_audits sitemap_audits_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_audits_deleted AFTER DELETE ON public.sitemap_audits REFERENCING OLD TABLE AS old_checks FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_audit_findings_counted();


--
-- Name: sitemap_audits sitemap_audits_inserted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_audits_inserted AFTER INSERT ON public.sitemap_audits REFERENCING NEW TABLE AS new_checks FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_audit_findings_counted();


--
-- Name: sitemap_audits sitemap_audits_truncated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_audits_truncated AFTER TRUNCATE ON public.sitemap_audits FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_audit_findings_counted();


--
-- Name: sitemap_audits sitemap_audits_updated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_audits_updated AFTER UPDATE ON public.sitemap_audits REFERENCING OLD TABLE AS old_checks NEW TABLE AS new_checks FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_audit_findings_counted();


--
-- Name: sitemap_lastmod_clamps sitemap_lastmod_clamps_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_lastmod_clamps_deleted AFTER DELETE ON public.sitemap_lastmod_clamps REFERENCING OLD TABLE AS old_clamps FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_lastmod_clamps_counted();


--
-- Name: sitemap_lastmod_clamps sitemap_lastmod_clamps_inserted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_lastmod_clamps_inserted AFTER INSERT ON public.sitemap_lastmod_clamps REFERENCING NEW TABLE AS new_clamps FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_lastmod_clamps_counted();


--
-- Name: sitemap_lastmod_clamps sitemap_lastmod_clamps_updated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_lastmod_clamps_updated AFTER UPDATE ON public.sitemap_lastmod_clamps REFERENCING OLD TABLE AS old_clamps NEW TABLE AS new_clamps FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_lastmod_clamps_counted();


--
-- Name: sitemap_news_files sitemap_news_files_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_news_files_deleted AFTER DELETE ON public.sitemap_news_files REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_news_files sitemap_news_files_inserted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_news_files_inserted AFTER INSERT ON public.sitemap_news_files REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_news_files sitemap_news_files_truncated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_news_files_truncated AFTER TRUNCATE ON public.sitemap_news_files FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_news_files sitemap_news_files_updated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_news_files_updated AFTER UPDATE ON public.sitemap_news_files REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_pages sitemap_pages_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_pages_deleted AFTER DELETE ON public.sitemap_pages REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_pages sitemap_pages_inserted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_pages_inserted AFTER INSERT ON public.sitemap_pages REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_pages sitemap_pages_truncated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_pages_truncated AFTER TRUNCATE ON public.sitemap_pages FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_pages sitemap_pages_updated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_pages_updated AFTER UPDATE ON public.sitemap_pages REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_pages_announce();


--
-- Name: sitemap_site_tokens sitemap_site_tokens_after_change; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_site_tokens_after_change AFTER INSERT OR DELETE OR UPDATE ON public.sitemap_site_tokens FOR EACH ROW EXECUTE FUNCTION public.sitemap_site_tokens_after_change();


--
-- Name: sitemap_sites sitemap_sites_after_change; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_sites_after_change AFTER INSERT OR DELETE OR UPDATE ON public.sitemap_sites FOR EACH ROW EXECUTE FUNCTION public.sitemap_sites_after_change();


--
-- Name: sitemap_sites sitemap_sites_audit_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_sites_audit_changed AFTER UPDATE ON public.sitemap_sites FOR EACH ROW EXECUTE FUNCTION public.sitemap_sites_audit_changed();


--
-- Name: sitemap_sites sitemap_sites_before_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_sites_before_update BEFORE UPDATE ON public.sitemap_sites FOR EACH ROW WHEN (((((((((((old.site IS DISTINCT FROM new.site) OR (old.origin IS DISTINCT FROM new.origin)) OR (old.path_prefix IS DISTINCT FROM new.path_prefix)) OR (old.robots_txt IS DISTINCT FROM new.robots_txt)) OR (old.include_subfolder_sites IS DISTINCT FROM new.include_subfolder_sites)) OR (old.indexnow_key IS DISTINCT FROM new.indexnow_key)) OR (old.index_format IS DISTINCT FROM new.index_format)) OR (old.nested_index IS DISTINCT FROM new.nested_index)) OR (old.robots_check IS DISTINCT FROM new.robots_check)) OR (old.robots_check_agents IS DISTINCT FROM new.robots_check_agents))) EXECUTE FUNCTION public.sitemap_sites_before_update();


--
-- Name: sitemap_sites sitemap_sites_robots_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_sites_robots_changed AFTER INSERT OR DELETE OR UPDATE ON public.sitemap_sites FOR EACH ROW EXECUTE FUNCTION public.sitemap_sites_robots_changed();


--
-- Name: sitemap_urls sitemap_urls_after_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_after_delete AFTER DELETE ON public.sitemap_urls REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_urls_after_delete();


--
-- Name: sitemap_urls sitemap_urls_after_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_after_insert AFTER INSERT ON public.sitemap_urls FOR EACH ROW WHEN ((new.change_xid IS DISTINCT FROM pg_current_xact_id())) EXECUTE FUNCTION public.sitemap_urls_mark_inserted();


--
-- Name: sitemap_urls sitemap_urls_after_move; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_after_move AFTER UPDATE ON public.sitemap_urls FOR EACH ROW WHEN ((((old.site IS DISTINCT FROM new.site) OR (old.section IS DISTINCT FROM new.section)) OR (old.loc IS DISTINCT FROM new.loc))) EXECUTE FUNCTION public.sitemap_urls_after_move();


--
-- Name: sitemap_urls sitemap_urls_after_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_after_truncate AFTER TRUNCATE ON public.sitemap_urls FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_urls_after_truncate();


--
-- Name: sitemap_urls sitemap_urls_before_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_before_update BEFORE UPDATE ON public.sitemap_urls FOR EACH ROW EXECUTE FUNCTION public.sitemap_urls_before_update();


--
-- Name: sitemap_urls sitemap_urls_deleted_for_moves; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_deleted_for_moves AFTER DELETE ON public.sitemap_urls REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_urls_refuse_moving_sites();


--
-- Name: sitemap_urls sitemap_urls_inserted_for_moves; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_inserted_for_moves AFTER INSERT ON public.sitemap_urls REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_urls_refuse_moving_sites();


--
-- Name: sitemap_urls sitemap_urls_updated_for_moves; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sitemap_urls_updated_for_moves AFTER UPDATE ON public.sitemap_urls REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.sitemap_urls_refuse_moving_sites();


--
-- Name: sitemap_site_tokens sitemap_site_tokens_site_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sitemap_site_tokens
    ADD CONSTRAINT sitemap_site_tokens_site_fkey FOREIGN KEY (site) REFERENCES public.sitemap_sites(site) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--
