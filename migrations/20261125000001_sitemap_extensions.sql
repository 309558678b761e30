-- The sitemap extensions: images, videos and Google News on a URL's row,
-- and hreflang alternates named by cluster.
--
-- Each extension is a column of sitemap_urls, so an application writes a URL
-- with everything it serves in one statement. The schema refuses what no
-- sitemap may hold: every rule is a CHECK whose error names the field, the
-- value and the rule (the service's validator applies the same rules first,
-- and a test keeps the two in step).
--
-- Extension bytes count toward a page's byte limit. A placement reserves its
-- entry's bytes as they are when it is folded, extensions included; when a
-- row's entry grows past what its page can still hold, the fold moves it to
-- the end of its section, the one case where a placed row moves. Pages are
-- packed by each entry's own size, so one large entry does not shrink the
-- pages of the small ones placed with it.

-- ISO 639-1 language codes (lower case).
CREATE FUNCTION sitemap_iso_languages() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT '{aa,ab,ae,af,ak,am,an,ar,as,av,ay,az,ba,be,bg,bh,bi,bm,bn,bo,br,bs,ca,ce,ch,co,cr,cs,cu,cv,cy,da,de,dv,dz,ee,el,en,eo,es,et,eu,fa,ff,fi,fj,fo,fr,fy,ga,gd,gl,gn,gu,gv,ha,he,hi,ho,hr,ht,hu,hy,hz,ia,id,ie,ig,ii,ik,io,is,it,iu,ja,jv,ka,kg,ki,kj,kk,kl,km,kn,ko,kr,ks,ku,kv,kw,ky,la,lb,lg,li,ln,lo,lt,lu,lv,mg,mh,mi,mk,ml,mn,mr,ms,mt,my,na,nb,nd,ne,ng,nl,nn,no,nr,nv,ny,oc,oj,om,or,os,pa,pi,pl,ps,pt,qu,rm,rn,ro,ru,rw,sa,sc,sd,se,sg,si,sk,sl,sm,sn,so,sq,sr,ss,st,su,sv,sw,ta,te,tg,th,ti,tk,tl,tn,to,tr,ts,tt,tw,ty,ug,uk,ur,uz,ve,vi,vo,wa,wo,xh,yi,yo,za,zh,zu}'::text[]
$$;

-- ISO 3166-1 alpha-2 country codes (upper case).
CREATE FUNCTION sitemap_iso_countries() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT '{AD,AE,AF,AG,AI,AL,AM,AO,AQ,AR,AS,AT,AU,AW,AX,AZ,BA,BB,BD,BE,BF,BG,BH,BI,BJ,BL,BM,BN,BO,BQ,BR,BS,BT,BV,BW,BY,BZ,CA,CC,CD,CF,CG,CH,CI,CK,CL,CM,CN,CO,CR,CU,CV,CW,CX,CY,CZ,DE,DJ,DK,DM,DO,DZ,EC,EE,EG,EH,ER,ES,ET,FI,FJ,FK,FM,FO,FR,GA,GB,GD,GE,GF,GG,GH,GI,GL,GM,GN,GP,GQ,GR,GS,GT,GU,GW,GY,HK,HM,HN,HR,HT,HU,ID,IE,IL,IM,IN,IO,IQ,IR,IS,IT,JE,JM,JO,JP,KE,KG,KH,KI,KM,KN,KP,KR,KW,KY,KZ,LA,LB,LC,LI,LK,LR,LS,LT,LU,LV,LY,MA,MC,MD,ME,MF,MG,MH,MK,ML,MM,MN,MO,MP,MQ,MR,MS,MT,MU,MV,MW,MX,MY,MZ,NA,NC,NE,NF,NG,NI,NL,NO,NP,NR,NU,NZ,OM,PA,PE,PF,PG,PH,PK,PL,PM,PN,PR,PS,PT,PW,PY,QA,RE,RO,RS,RU,RW,SA,SB,SC,SD,SE,SG,SH,SI,SJ,SK,SL,SM,SN,SO,SR,SS,ST,SV,SX,SY,SZ,TC,TD,TF,TG,TH,TJ,TK,TL,TM,TN,TO,TR,TT,TV,TW,TZ,UA,UG,UM,US,UY,UZ,VA,VC,VE,VG,VI,VN,VU,WF,WS,YE,YT,ZA,ZM,ZW}'::text[]
$$;

-- A refused value: raises check_violation naming the field, the value (cut
-- to 100 characters) and the rule, as the service's validator words it.
CREATE FUNCTION sitemap_refuse(field text, value text, rule text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation',
        MESSAGE = format('sitemap_urls.%s %s: %s', field,
                         CASE WHEN char_length(value) > 100 THEN to_json(left(value, 100) || '…')::text
                              ELSE to_json(value)::text END,
                         rule);
END $$;

-- An absolute http(s) URL with a host, no whitespace or control character,
-- and at most 2,048 characters as served (the rule of <loc>).
CREATE FUNCTION sitemap_check_url(field text, value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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

-- A date, or a date and time to the second with a zone: the W3C datetimes
-- that are also XML Schema dates and dateTimes, which crawlers validate the
-- extensions against. Returns the instant (a date alone is midnight UTC),
-- or NULL.
CREATE FUNCTION sitemap_w3c_datetime(value text) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF value ~ '^\d{4}-\d{2}-\d{2}$' THEN
        RETURN (value || 'T00:00:00+00:00')::timestamptz;
    ELSIF value ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$' THEN
        RETURN value::timestamptz;
    END IF;
    RETURN NULL;
EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
    RETURN NULL;
END $$;

CREATE FUNCTION sitemap_check_datetime(field text, value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'string' OR sitemap_w3c_datetime(value #>> '{}') IS NULL THEN
        RETURN sitemap_refuse(field, coalesce(value #>> '{}', 'null'),
            'a date (YYYY-MM-DD) or a date and time with seconds and zone (YYYY-MM-DDThh:mm:ss[.s] with Z or ±hh:mm)');
    END IF;
    RETURN true;
END $$;

CREATE FUNCTION sitemap_check_text(field text, value jsonb, max_chars integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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

CREATE FUNCTION sitemap_check_boolean(field text, value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'boolean' THEN
        RETURN sitemap_refuse(field, coalesce(value #>> '{}', 'null'), 'true or false (served as yes / no)');
    END IF;
    RETURN true;
END $$;

-- Keys outside `allowed` are refused, the ones Google deprecated in 2022
-- with that reason.
CREATE FUNCTION sitemap_check_keys(field text, value jsonb, allowed text[], deprecated text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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
END $$;

CREATE FUNCTION sitemap_check_images(images jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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

CREATE FUNCTION sitemap_check_videos(loc text, videos jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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
END $$;

CREATE FUNCTION sitemap_check_news(news jsonb) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
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
END $$;

-- hreflang: an ISO 639-1 language, optionally with an ISO 3166-1 alpha-2
-- region, or x-default; matched case-insensitively, as crawlers do.
CREATE FUNCTION sitemap_check_hreflang(hreflang text[], cluster text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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
END $$;

ALTER TABLE sitemap_urls
    ADD COLUMN images jsonb NULL,
    ADD COLUMN videos jsonb NULL,
    ADD COLUMN news jsonb NULL,
    ADD COLUMN hreflang text[] NULL,
    ADD COLUMN hreflang_cluster text NULL;

-- NOT VALID: the columns are new, so no stored row can break them.
ALTER TABLE sitemap_urls
    ADD CONSTRAINT sitemap_urls_images CHECK (images IS NULL OR sitemap_check_images(images)) NOT VALID,
    ADD CONSTRAINT sitemap_urls_videos CHECK (videos IS NULL OR sitemap_check_videos(loc, videos)) NOT VALID,
    ADD CONSTRAINT sitemap_urls_news CHECK (news IS NULL OR sitemap_check_news(news)) NOT VALID,
    ADD CONSTRAINT sitemap_urls_hreflang
        CHECK ((hreflang IS NULL AND hreflang_cluster IS NULL) OR sitemap_check_hreflang(hreflang, hreflang_cluster))
        NOT VALID;

-- A cluster's members, found by name.
CREATE INDEX sitemap_urls_cluster_idx ON sitemap_urls (hreflang_cluster) WHERE hreflang_cluster IS NOT NULL;

-- Served changes now include the extensions.
CREATE OR REPLACE FUNCTION sitemap_urls_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
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
        NEW.images, NEW.videos, NEW.news, NEW.hreflang, NEW.hreflang_cluster, NEW.updated_at)
        IS DISTINCT FROM (OLD.site, OLD.section, OLD.loc, OLD.lastmod, OLD.changefreq, OLD.priority,
        OLD.images, OLD.videos, OLD.news, OLD.hreflang, OLD.hreflang_cluster, OLD.updated_at)
    THEN
        NEW.change_xid := pg_current_xact_id();
    ELSE
        NEW.change_xid := OLD.change_xid;
    END IF;
    RETURN NEW;
END $$;

-- Bytes of a URL and of a text as the writer emits them (the five XML
-- entities escaped; in a URL, non-ASCII percent-encoded too).
CREATE FUNCTION sitemap_url_bytes(url text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT sitemap_entry_bytes(url) - 125
$$;

CREATE FUNCTION sitemap_text_bytes(value text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT octet_length(value)
    + 4 * (char_length(value) - char_length(replace(value, '&', '')))
    + 3 * (char_length(value) - char_length(translate(value, '<>', '')))
    + 5 * (char_length(value) - char_length(translate(value, '"''', '')))
$$;

-- The most bytes one video's element takes, mirrored by the writer (whose
-- tests hold the two equal): tags as written, values at their longest where
-- the writer formats them (a duration 5 bytes, a rating 5, yes / no 3).
CREATE FUNCTION sitemap_video_bytes(video jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT octet_length('<video:video></video:video>')
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
    + coalesce((SELECT sum(octet_length('<video:tag></video:tag>') + sitemap_text_bytes(t))
                FROM jsonb_array_elements_text(video -> 'tags') t), 0)
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
           THEN octet_length('<video:platform relationship="allow"></video:platform>')
                + coalesce((SELECT sum(octet_length(p) + 1) - 1
                            FROM jsonb_array_elements_text(video #> '{platform,platforms}') p), 0)
           ELSE 0 END
    + CASE WHEN video ? 'live' THEN octet_length('<video:live></video:live>') + 3 ELSE 0 END
$$;

-- The bytes a row's images and videos add to its entry.
CREATE FUNCTION sitemap_media_bytes(images jsonb, videos jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN images IS NULL AND videos IS NULL THEN 0 ELSE
    coalesce((SELECT sum(octet_length('<image:image><image:loc></image:loc></image:image>')
                         + sitemap_url_bytes(i ->> 'loc'))::integer
              FROM jsonb_array_elements(images) i), 0)
    + coalesce((SELECT sum(sitemap_video_bytes(v))::integer FROM jsonb_array_elements(videos) v), 0)
END
$$;

-- What each placement adds to its page besides one URL and its bytes, and
-- the pages' totals: a page declares the namespaces its entries use, and
-- the stats count each extension, from these.
ALTER TABLE sitemap_placements
    ADD COLUMN images integer NOT NULL DEFAULT 0,
    ADD COLUMN videos integer NOT NULL DEFAULT 0,
    ADD COLUMN alternates integer NOT NULL DEFAULT 0;
ALTER TABLE sitemap_pages
    ADD COLUMN images bigint NOT NULL DEFAULT 0,
    ADD COLUMN videos bigint NOT NULL DEFAULT 0,
    ADD COLUMN alternates bigint NOT NULL DEFAULT 0;

DROP FUNCTION sitemap_unplace(bigint[]);
DROP FUNCTION sitemap_apply_deltas(text[], text[], integer[], bigint[], bigint[]);

-- Adds per-page deltas (URLs, bytes, extension entries) to the summaries
-- and moves each listed page's lastmod forward (a zero delta is a change in
-- place).
CREATE FUNCTION sitemap_apply_deltas(
    sites text[], sections text[], pages integer[], counts bigint[], byte_counts bigint[],
    image_counts bigint[], video_counts bigint[], alternate_counts bigint[]
) RETURNS void
LANGUAGE plpgsql AS $$
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

-- Takes rows off their pages (they go to sitemap_unplaced, for the next fold
-- to place again) and subtracts them from their pages.
CREATE FUNCTION sitemap_unplace(ids bigint[]) RETURNS void
LANGUAGE sql AS $$
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

-- The hreflang clusters as served, rebuilt by folds from the rows that name
-- them: every member lists every member, itself included, so no link is
-- ever one-way. A cluster with a problem is served without any links, and
-- its problem is reported.
CREATE TABLE sitemap_clusters (
    cluster text PRIMARY KEY,
    -- the links, ordered by hreflang: hreflangs[i] names hrefs[i]
    hreflangs text[] NOT NULL,
    hrefs text[] NOT NULL,
    -- bytes the links add to each member's entry
    link_bytes integer NOT NULL,
    -- why the cluster is not served, if it is not
    problem text NULL
);
CREATE INDEX sitemap_clusters_problem_idx ON sitemap_clusters (cluster) WHERE problem IS NOT NULL;

-- The cluster each placement was folded with, to find the clusters a change
-- or a removal touches.
ALTER TABLE sitemap_placements ADD COLUMN cluster text NULL;
CREATE INDEX sitemap_placements_cluster_idx ON sitemap_placements (cluster) WHERE cluster IS NOT NULL;

-- Rebuilds the clusters listed in sitemap_fold_clusters from the rows that
-- name them, and marks those whose served links changed. Part of a fold.
CREATE FUNCTION sitemap_rebuild_clusters() RETURNS void
LANGUAGE plpgsql AS $$
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

-- Folds every change committed since the last fold; returns how many rows
-- it placed, changed in place or took off a page. Must run in a REPEATABLE
-- READ transaction that locked sitemap_fold_state before its first query,
-- so that its one snapshot is newer than the last fold's.
--
-- Rows are placed set-based. A section's new rows, in id order, fill its
-- last page and then new pages, each row taking its own bytes: a row starts
-- on the page where the running total of max(bytes * max_urls, room) falls,
-- in units of max_urls * room per page, where room is the page budget less
-- the batch's largest entry. So no page holds more than max_urls rows (each
-- takes at least room / max_urls of a unit) or more than its budget (a page
-- ends at most one entry past room).
-- JIT stays off whoever calls it: compiling the plans (the working tables
-- carry no statistics, so their estimates look huge) takes about a second,
-- far more than a fold of any usual batch.
CREATE OR REPLACE FUNCTION sitemap_fold() RETURNS bigint
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    previous pg_snapshot;
    current_snapshot pg_snapshot := pg_current_snapshot();
    seen timestamptz := clock_timestamp();
    folded bigint;
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
    -- each commit), so frequent folds do not churn the catalog.
    IF to_regclass('pg_temp.sitemap_fold_batch') IS NULL THEN
        -- the rows to fold, as they are now
        CREATE TEMP TABLE sitemap_fold_batch (
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
            replaced boolean NOT NULL
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

    -- A truncation took every row: every page empties, and what was
    -- written after it is placed below like any new row.
    IF EXISTS (SELECT 1 FROM sitemap_removals WHERE id IS NULL) THEN
        DELETE FROM sitemap_placements;
        DELETE FROM sitemap_unplaced;
        DELETE FROM sitemap_clusters;
        UPDATE sitemap_pages
        SET url_count = 0, bytes = 0, images = 0, videos = 0, alternates = 0,
            lastmod = greatest(clock_timestamp(), lastmod + interval '1 microsecond')
        WHERE url_count > 0;
    END IF;

    -- URLs that left: off their pages, into the feed.
    WITH taken AS (
        DELETE FROM sitemap_removals RETURNING id, site, loc
    ), dropped AS (
        DELETE FROM sitemap_placements p USING taken t
        WHERE p.id = t.id AND p.site = t.site AND p.loc_hash = sitemap_loc_hash(t.loc)
        RETURNING p.site, p.section, p.page, p.bytes, p.images, p.videos, p.alternates, p.cluster, t.loc
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'removed', seen FROM dropped WHERE page IS NOT NULL
    ), clusters AS (
        INSERT INTO sitemap_fold_clusters (cluster)
        SELECT DISTINCT cluster FROM dropped WHERE cluster IS NOT NULL
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, -count(*), -sum(bytes), -sum(images), -sum(videos), -sum(alternates), count(*), false
    FROM dropped WHERE page IS NOT NULL GROUP BY site, section, page;

    -- Rows changed by transactions the last fold did not see: those that
    -- began after it, and those it saw still running. Then rows a
    -- configuration change took off their page.
    INSERT INTO sitemap_fold_batch
    SELECT u.id, u.site, u.section, u.loc, u.hreflang_cluster,
           sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos),
           coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0), false
    FROM sitemap_urls u
    WHERE u.change_xid >= pg_snapshot_xmax(previous)
       OR u.change_xid = ANY (ARRAY(SELECT pg_snapshot_xip(previous)));
    WITH requeued AS (
        DELETE FROM sitemap_unplaced RETURNING id
    )
    INSERT INTO sitemap_fold_batch
    SELECT u.id, u.site, u.section, u.loc, u.hreflang_cluster,
           sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos),
           coalesce(jsonb_array_length(u.images), 0), coalesce(jsonb_array_length(u.videos), 0), true
    FROM requeued q JOIN sitemap_urls u ON u.id = q.id
    WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_batch f WHERE f.id = q.id);
    IF (SELECT count(*) FROM (SELECT 1 FROM sitemap_fold_batch LIMIT 10001) c) > 10000 THEN
        ANALYZE sitemap_fold_batch;
    END IF;

    -- A row that is now another URL (its site, section or loc changed)
    -- leaves the page it was placed on, and a row left out is looked at
    -- again (it may fit now); both are placed again below.
    WITH moved AS (
        DELETE FROM sitemap_placements p USING sitemap_fold_batch f
        WHERE p.id = f.id
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

    -- Clusters the changed rows name now or were folded with.
    INSERT INTO sitemap_fold_clusters (cluster)
    SELECT f.cluster FROM sitemap_fold_batch f WHERE f.cluster IS NOT NULL
    UNION
    SELECT p.cluster FROM sitemap_fold_batch f JOIN sitemap_placements p ON p.id = f.id
    WHERE p.cluster IS NOT NULL
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM sitemap_fold_clusters) THEN
        PERFORM sitemap_rebuild_clusters();
    END IF;

    -- Rows still on their page whose entry changed: their own row, or the
    -- links of their cluster. Each takes its new size where it is, unless
    -- its page cannot hold what the growth adds: then the rows that grew
    -- leave it and are placed again, at the end of their section.
    WITH candidates AS (
        SELECT f.id, NOT f.replaced AS announced FROM sitemap_fold_batch f
        UNION
        SELECT p.id, true FROM sitemap_fold_clusters c JOIN sitemap_placements p ON p.cluster = c.cluster
        WHERE c.changed AND p.page IS NOT NULL
    ), sized AS MATERIALIZED (
        SELECT p.id, p.site, p.section, p.page, u.loc, bool_or(c.announced) AS announced,
               p.bytes AS old_bytes, p.images AS old_images, p.videos AS old_videos,
               p.alternates AS old_alternates, u.hreflang_cluster AS cluster,
               sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos)
                   + coalesce(k.link_bytes, 0) AS bytes,
               coalesce(jsonb_array_length(u.images), 0) AS images,
               coalesce(jsonb_array_length(u.videos), 0) AS videos,
               coalesce(cardinality(k.hrefs), 0) AS alternates
        FROM candidates c
        JOIN sitemap_placements p ON p.id = c.id AND p.page IS NOT NULL
        JOIN sitemap_urls u ON u.id = p.id
        LEFT JOIN sitemap_clusters k ON k.cluster = u.hreflang_cluster AND k.problem IS NULL
        GROUP BY p.id, u.id, k.cluster
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
        RETURNING p.id
    ), requeued AS (
        -- placed again below; the feed hears of them here
        INSERT INTO sitemap_fold_batch
        SELECT s.id, s.site, s.section, s.loc, s.cluster, s.bytes - coalesce(k.link_bytes, 0),
               s.images, s.videos, true
        FROM sized s JOIN evicted e ON e.id = s.id
        LEFT JOIN sitemap_clusters k ON k.cluster = s.cluster AND k.problem IS NULL
        WHERE NOT EXISTS (SELECT 1 FROM sitemap_fold_batch f WHERE f.id = s.id)
    ), marked AS (
        UPDATE sitemap_fold_batch f SET replaced = true FROM evicted e WHERE f.id = e.id
    ), announced AS (
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'updated', seen FROM sized WHERE announced
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
    -- Applied now: the placing below must see what the growth took.
    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE applied;

    -- Rows without a place get one, or the reason they are left out.
    WITH fresh AS MATERIALIZED (
        SELECT f.id, f.site, f.section, f.loc, f.cluster, f.replaced, f.images, f.videos,
               f.own_bytes + coalesce(k.link_bytes, 0) AS bytes,
               coalesce(cardinality(k.hrefs), 0) AS alternates,
               CASE WHEN s.site IS NULL THEN 'site not configured'
                    WHEN NOT sitemap_loc_in_scope(f.loc, s.origin, s.path_prefix)
                        THEN 'loc outside the site''s base URL ' || s.origin || s.path_prefix
                    WHEN f.own_bytes + coalesce(k.link_bytes, 0) > c.entry_budget
                        THEN format('entry of %s bytes, over the page budget of %s (max_bytes less %s)',
                                    f.own_bytes + coalesce(k.link_bytes, 0), c.entry_budget, 1024)
               END AS skip_reason
        FROM sitemap_fold_batch f
        CROSS JOIN sitemap_settings c
        LEFT JOIN sitemap_sites s ON s.site = f.site
        LEFT JOIN sitemap_clusters k ON k.cluster = f.cluster AND k.problem IS NULL
        WHERE NOT EXISTS (SELECT 1 FROM sitemap_placements p WHERE p.id = f.id)
    ), sections AS MATERIALIZED (
        -- one look at each section's last page, not one per row
        SELECT g.site, g.section, coalesce(t.page, 1) AS tail,
               c.max_urls::bigint * greatest(1, c.entry_budget - g.largest) AS unit,
               c.max_urls::bigint AS max_urls,
               greatest(1, c.entry_budget - g.largest) AS room,
               -- where the new rows begin: past what the last page holds
               least(c.max_urls::bigint * greatest(1, c.entry_budget - g.largest),
                     greatest(coalesce(t.bytes, 0) * c.max_urls,
                              coalesce(t.url_count, 0) * greatest(1, c.entry_budget - g.largest))) AS start
        FROM (SELECT site, section, max(bytes) AS largest FROM fresh
              WHERE skip_reason IS NULL GROUP BY site, section) g
        CROSS JOIN sitemap_settings c
        LEFT JOIN LATERAL (SELECT p.page, p.url_count, p.bytes FROM sitemap_pages p
                           WHERE p.site = g.site AND p.section = g.section
                           ORDER BY p.page DESC LIMIT 1) t ON true
    ), numbered AS (
        -- byte order: the database's collation would compare every pair
        -- of names the slow way
        SELECT f.*, s.tail, s.unit,
               s.start + coalesce(sum(greatest(f.bytes * s.max_urls, s.room))
                   OVER (PARTITION BY f.site COLLATE "C", f.section COLLATE "C" ORDER BY f.id
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::bigint AS offset_in_units
        FROM fresh f JOIN sections s ON s.site = f.site AND s.section = f.section
        WHERE f.skip_reason IS NULL
    ), placed AS (
        INSERT INTO sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason,
                                        images, videos, alternates, cluster)
        SELECT r.id, r.site, r.section, sitemap_loc_hash(r.loc),
               (r.tail + r.offset_in_units / r.unit)::integer, r.bytes, NULL,
               r.images, r.videos, r.alternates, r.cluster
        FROM numbered r
        UNION ALL
        SELECT id, site, section, sitemap_loc_hash(loc), NULL, 0, skip_reason, 0, 0, 0, cluster
        FROM fresh WHERE skip_reason IS NOT NULL
        RETURNING id, site, section, page, bytes, images, videos, alternates
    ), announced AS (
        -- every numbered row is placed: announced as the window ordered them
        INSERT INTO sitemap_changes (site, loc, change, committed_at)
        SELECT site, loc, 'added', seen FROM numbered WHERE NOT replaced
    )
    INSERT INTO sitemap_fold_page_deltas
    SELECT site, section, page, count(*), sum(bytes), sum(images), sum(videos), sum(alternates), count(*), false
    FROM placed WHERE page IS NOT NULL GROUP BY site, section, page;

    PERFORM sitemap_apply_deltas(array_agg(site), array_agg(section), array_agg(page), array_agg(url_count),
                                 array_agg(bytes), array_agg(images), array_agg(videos), array_agg(alternates))
    FROM sitemap_fold_page_deltas WHERE NOT applied;
    SELECT coalesce(sum(rows_folded), 0) INTO folded FROM sitemap_fold_page_deltas;

    UPDATE sitemap_fold_state SET folded_through = current_snapshot, folded_at = seen;
    RETURN folded;
END $$;
