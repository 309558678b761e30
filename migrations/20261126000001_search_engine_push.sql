-- Telling search engines what changed (README, "Telling search engines").
-- Both tables belong to the service: applications never write them.

-- How far each site's IndexNow push has gone in the change feed: the last
-- entry of the last batch the endpoint accepted (or refused for good).
-- The service creates a site's row at the feed's end the first time the
-- site has a key, so old changes are never back-filled. A replica sends
-- only while it holds this row locked, which makes replicas take turns.
CREATE TABLE sitemap_indexnow_cursors (
    site text PRIMARY KEY,
    delivered_through bigint NOT NULL,
    delivered_at timestamptz NOT NULL DEFAULT now()
);

-- Each site's index, submitted by GET to each `submit_urls` template:
-- the index version (its newest page lastmod) the last 200 told about, and
-- when the last try was, successful or not (tries are an interval apart).
CREATE TABLE sitemap_submissions (
    site text NOT NULL,
    template text NOT NULL,
    submitted_version timestamptz,
    attempted_at timestamptz,
    PRIMARY KEY (site, template)
);
