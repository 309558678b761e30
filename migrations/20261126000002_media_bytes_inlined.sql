-- A fold sizes every row it places with sitemap_media_bytes, whose
-- subqueries keep PostgreSQL from inlining it: it ran as a function call
-- for every row, about 4 us even for a row with no images or videos (4.0 s
-- of a fold of 1M plain rows). It becomes a bare expression, which the
-- planner inlines, around the sum, which now runs only for rows that have
-- media. Callers keep calling sitemap_media_bytes by name.
ALTER FUNCTION sitemap_media_bytes(jsonb, jsonb) RENAME TO sitemap_media_elements_bytes;

CREATE FUNCTION sitemap_media_bytes(images jsonb, videos jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN images IS NULL AND videos IS NULL THEN 0
            ELSE sitemap_media_elements_bytes(images, videos) END
$$;
