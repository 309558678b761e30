-- Bulk writes pay these per row, so each is made cheaper without changing
-- what it computes or accepts (measured on 1M rows; see BENCHMARKS.md):
--
-- * `sitemap_entry_bytes` counted escapes with four string rewrites per
--   row (2.5 s per million). Nearly every loc is ASCII without a character
--   to escape, which `strpos` tells far faster; only other locs take the
--   full count.
-- * The row trigger ran PL/pgSQL for every inserted row, even for rows that
--   arrive already packed (a bulk import), where it changes nothing. A WHEN
--   clause, evaluated without entering PL/pgSQL, now skips those.
-- * PostgreSQL's regex engine has a high fixed cost per call: the scheme
--   check `loc ~ '^https?://[^/?#]'` took a second per million rows. The same
--   rule is now two prefix tests and one character.

CREATE OR REPLACE FUNCTION sitemap_entry_bytes(loc text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
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

-- sitemap_urls_before_insert changes a row only when it arrives without a
-- page, with a skip reason, or marked as logged.
DROP TRIGGER sitemap_urls_before_insert ON sitemap_urls;
CREATE TRIGGER sitemap_urls_before_insert BEFORE INSERT ON sitemap_urls
    FOR EACH ROW
    WHEN (NEW.page IS NULL OR NEW.skip_reason IS NOT NULL OR NEW.skip_logged)
    EXECUTE FUNCTION sitemap_urls_before_insert();

ALTER TABLE sitemap_urls
    DROP CONSTRAINT sitemap_urls_loc_url,
    ADD CONSTRAINT sitemap_urls_loc_url CHECK (
        char_length(loc) <= 2048
        AND (starts_with(loc, 'http://') OR starts_with(loc, 'https://'))
        -- the host's first character: the one after the scheme's "//"
        AND substr(loc, strpos(loc, '//') + 2, 1) NOT IN ('', '/', '?', '#')
        AND loc !~ '[\x01-\x20\x7f]'
    );
