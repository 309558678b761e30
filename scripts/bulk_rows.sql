-- The bulk benchmarks' rows as TSV (section, loc, lastmod): shop-like URLs
-- of three sections, locs not in key order, lastmod on all.
--   psql -qAt -v rows=N -f scripts/bulk_rows.sql > rows.tsv
COPY (
    SELECT (ARRAY['blog','products','news'])[1 + g % 3],
           'http://localhost:8080/' || (ARRAY['blog','products','news'])[1 + g % 3] || '/'
               || substr(md5(g::text), 1, 10) || '-item-' || g,
           timestamptz '2026-01-01' + make_interval(secs => g % 31536000)
    FROM generate_series(1, :rows) g) TO STDOUT;
