-- The slug checks ran on every written row, and PostgreSQL's regex engine
-- expands a bounded repetition such as {0,63} into a large automaton: those
-- two checks cost more than the rest of an INSERT together. The same rule
-- as an unbounded class plus a length test is several times cheaper.
ALTER TABLE sitemap_urls
    DROP CONSTRAINT sitemap_urls_site_slug,
    DROP CONSTRAINT sitemap_urls_section_slug,
    ADD CONSTRAINT sitemap_urls_site_slug
        CHECK (site ~ '^[a-z0-9][a-z0-9_-]*$' AND octet_length(site) <= 64),
    ADD CONSTRAINT sitemap_urls_section_slug
        CHECK (section = '' OR (section ~ '^[a-z0-9][a-z0-9_-]*$' AND octet_length(section) <= 64));
