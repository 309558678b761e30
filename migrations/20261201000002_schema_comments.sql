-- Each table's, column's and function's purpose as its comment, so that
-- schema.sql (pg_dump of a migrated database) says what every object is for
-- beside its current text. Changes nothing else.

-- Tables and the view.

COMMENT ON TABLE sitemap_urls IS
$$The page records applications write with plain SQL, in transactions of their own that never wait for sitemapd. CHECK constraints refuse what no sitemap may hold, naming the constraint. Folds place each committed row on a page of its site's section for good (sitemap_placed). The other sitemap_* tables belong to sitemapd; sitemap_changes is there to be read.$$;
COMMENT ON COLUMN sitemap_urls.id IS
$$Managed by sitemapd: fixed for the row's life (sitemap_urls_before_update refuses a change). Rows are placed in id order.$$;
COMMENT ON COLUMN sitemap_urls.site IS
$$The site the URL belongs to (a slug). A row of a site that is not configured is left out of every sitemap, with a reason.$$;
COMMENT ON COLUMN sitemap_urls.section IS
$$'' for the default section, else a slug served as sitemap-{section}-N.$$;
COMMENT ON COLUMN sitemap_urls.loc IS
$$An absolute http(s) URL, unique per site, at most 2,048 characters as served (each non-ASCII byte as %XX). A loc outside its site's base URL is left out, with a reason.$$;
COMMENT ON COLUMN sitemap_urls.lastmod IS
$$When the page's content last changed; served in UTC. A page's lastmod in the index derives from its rows'.$$;
COMMENT ON COLUMN sitemap_urls.changefreq IS
$$always, hourly, daily, weekly, monthly, yearly or never.$$;
COMMENT ON COLUMN sitemap_urls.priority IS
$$0.0 to 1.0, served with at most three decimals.$$;
COMMENT ON COLUMN sitemap_urls.updated_at IS
$$Set to now() by every UPDATE that changes what the row serves.$$;
COMMENT ON COLUMN sitemap_urls.change_xid IS
$$Managed by sitemapd: the transaction that last changed the row, which tells folds what is new. Whatever a write gives is replaced by the writer's own transaction; an UPDATE that sets it to pg_current_xact_id() has the row folded again.$$;
COMMENT ON COLUMN sitemap_urls.images IS
$$Image sitemap extension: a JSON array of {"loc": URL}, checked by sitemap_check_images.$$;
COMMENT ON COLUMN sitemap_urls.videos IS
$$Video sitemap extension: a JSON array of video objects, checked by sitemap_check_videos.$$;
COMMENT ON COLUMN sitemap_urls.news IS
$$News sitemap extension: a JSON object (publication, publication_date, title), checked by sitemap_check_news. Rows with news are listed in the site's news sitemap while published within its window.$$;
COMMENT ON COLUMN sitemap_urls.hreflang IS
$$The languages this URL stands for in its cluster (ISO 639-1, optional region, or x-default); set together with hreflang_cluster.$$;
COMMENT ON COLUMN sitemap_urls.hreflang_cluster IS
$$The name of the group of URLs that are translations of one another; every member links every member (sitemap_clusters).$$;

COMMENT ON TABLE sitemap_settings IS
$$The page limits, one row, written by the service from its configuration at start-up (sitemap_configure_limits): most URLs a page holds, and the bytes its entries may take.$$;
COMMENT ON TABLE sitemap_sites IS
$$The sites the service serves, written from its configuration at start-up (sitemap_configure_site): the origin and path prefix a loc must lie under to be served.$$;
COMMENT ON TABLE sitemap_pages IS
$$One summary per page: URLs, bytes, extension entries and lastmod. The sitemap index and a page's validators are read from here alone. Written by folds; every statement that changes it notifies sitemapd_pages.$$;
COMMENT ON TABLE sitemap_placements IS
$$Where a row is served (page) or why it is not (skip_reason), with the bytes its entry reserves and the loc hash it was placed with. Rows with extensions are placed here one by one; plain rows placed together stand in sitemap_placement_runs. A row stands in one placement or one run, never both. Written by folds alone.$$;
COMMENT ON TABLE sitemap_placement_runs IS
$$Up to 64 consecutive rows of a section placed together on one page, as one row whose arrays give each row's id, loc hash and reserved bytes: a bulk load costs one small row per 64 URLs instead of a placement each. A row changed in place keeps its run when its entry is as placed; otherwise it leaves its run (sitemap_explode).$$;
COMMENT ON VIEW sitemap_placed IS
$$Every placement, one row per URL, whether it stands alone or in a run. Filter it by (site, section, page): both halves are read through their page indexes. By id, use sitemap_placement_of.$$;
COMMENT ON TABLE sitemap_unplaced IS
$$Rows a configuration change took off their page (limits lowered, a base URL changed), for the next fold to place again.$$;
COMMENT ON TABLE sitemap_removals IS
$$URLs that left sitemap_urls or became another URL, written by its triggers for the next fold; a row with a NULL id says the table was truncated.$$;
COMMENT ON TABLE sitemap_fold_state IS
$$One row: the snapshot the last fold read with, and the pass under way (its snapshot and the last row it read). Locked by every fold and every configuration change, which makes them take turns across replicas.$$;
COMMENT ON TABLE sitemap_changes IS
$$The change feed, oldest first: each URL added, updated or removed, with its fold's commit time. Read-only for applications; pruned by the service (change_log_retention, change_log_max_rows).$$;
COMMENT ON TABLE sitemap_change_stash IS
$$Feed entries a fold of many rows kept for the service to write out apart, so the fold's transaction stays short: locs[i] is one entry, written to sitemap_changes in (id, i) order by sitemap_write_out_feed. While any are kept, every fold keeps its entries here too, so the feed stays in fold order.$$;
COMMENT ON TABLE sitemap_feed_writer IS
$$One row whose lock is the turn to write out sitemap_change_stash: one writer at a time across replicas.$$;
COMMENT ON TABLE sitemap_clusters IS
$$The hreflang clusters as served, rebuilt by folds from the rows that name them: every member lists every member, itself included, so no link is one-way. A cluster with a problem is served without links, and the problem is reported.$$;
COMMENT ON TABLE sitemap_news_windows IS
$$Each site with news records: the window its news files were last listed for, and how many articles a file holds.$$;
COMMENT ON TABLE sitemap_news_files IS
$$One summary per news file of a site: its articles' count, digest and lastmod (new when its articles change). Every statement that changes it notifies sitemapd_pages.$$;
COMMENT ON TABLE sitemap_news_state IS
$$One row: when the news files must be listed again at the latest, because the next article leaves the window then ('infinity': none is in it).$$;
COMMENT ON TABLE sitemap_indexnow_cursors IS
$$How far each site's IndexNow push has gone in the change feed: the last entry of the last batch the endpoint accepted or refused for good. Created at the feed's end the first time a site has a key, so old changes are never back-filled. A replica sends only while it holds its site's row locked.$$;
COMMENT ON TABLE sitemap_submissions IS
$$Each site's index, submitted by GET to each submit_urls template: the index version (its newest page lastmod) the last 200 answer was for, and when the last try was.$$;

-- The writers' triggers on sitemap_urls.

COMMENT ON FUNCTION sitemap_urls_mark_inserted() IS
$$After INSERT, for rows that arrived with a change_xid of their own (a copy from a backup, say): marks them with the writer's transaction, so folds see them. Rows that take the default never reach it (the trigger's WHEN clause).$$;
COMMENT ON FUNCTION sitemap_urls_before_update() IS
$$Before UPDATE: refuses a change of id; sets updated_at when what the row serves changed and the write did not set it; marks a real change with the writer's transaction (change_xid), and keeps the old mark on an UPDATE that changes nothing, so it touches no page. A write that sets change_xid to its own transaction has the row folded again.$$;
COMMENT ON FUNCTION sitemap_urls_after_move() IS
$$After an UPDATE of site, section or loc: the old URL goes to sitemap_removals, so the next fold takes it off its page and feeds its removal.$$;
COMMENT ON FUNCTION sitemap_urls_after_delete() IS
$$After DELETE, once per statement: the deleted URLs go to sitemap_removals for the next fold.$$;
COMMENT ON FUNCTION sitemap_urls_after_truncate() IS
$$After TRUNCATE: one row with a NULL id in sitemap_removals tells the next fold to empty every page.$$;
COMMENT ON FUNCTION sitemap_pages_notify() IS
$$Statement trigger on sitemap_pages and sitemap_news_files: notifies sitemapd_pages, so servers drop the summaries they keep in memory. PostgreSQL delivers at commit and folds duplicates within a transaction, so a bulk write costs one notification.$$;

-- Configuration, written by the service at start-up.

COMMENT ON FUNCTION sitemap_configure_limits(integer, bigint) IS
$$Writes the page limits (max_urls, and the bytes entries may take on a page). Takes off the pages that no longer fit them their newest rows, just enough, for the next fold to place again. The service runs it under the lock of sitemap_fold_state, so it takes turns with folds.$$;
COMMENT ON FUNCTION sitemap_configure_site(text, text, text) IS
$$Writes a site's origin and path prefix. When they change, every row of the site that the new base URL does not admit, and every row of it left out, goes back to be placed by the next fold. The service runs it under the lock of sitemap_fold_state, so it takes turns with folds.$$;

-- The fold: one REPEATABLE READ transaction that locked sitemap_fold_state
-- first runs sitemap_fold_begin, then the service numbers the rows of
-- sitemap_fold_unplaced and COPYs their runs and placements, then
-- sitemap_fold_announce, then sitemap_fold_end.

COMMENT ON FUNCTION sitemap_fold_begin(bigint) IS
$$Step 1 of a fold, in a REPEATABLE READ transaction that locked sitemap_fold_state before its first query. Begins a pass when none is under way, reads at most max_rows changed rows (all when NULL) of the transactions the pass covers (sitemap_fold_ranges, sitemap_fold_read), applies removals, moves and rows changed in place, takes off their pages the rows that outgrew them, writes the 'updated' and 'removed' feed entries, and leaves the rows to place, sized, in the temporary view sitemap_fold_unplaced for the service to number. Returns whether it began a pass. One fold a transaction.$$;
COMMENT ON FUNCTION sitemap_fold_announce(bigint[]) IS
$$Step 3 of a fold: the 'added' feed entries, for every row of sitemap_fold_unplaced but those skipped (left out) or placed again. Runs before the placements are written, which take rows out of sitemap_fold_unplaced; grouped by hashing rather than sorting. A fold of 10,000 rows or more, or one that finds entries kept, keeps them in sitemap_change_stash.$$;
COMMENT ON FUNCTION sitemap_fold_end() IS
$$Step 4 of a fold: adds the page deltas to the summaries (sitemap_apply_deltas) and records how far the pass has read. Returns how many rows the fold placed, changed in place or took off a page, and whether it caught up: its pass is done and no row waits to be placed again.$$;
COMMENT ON FUNCTION sitemap_fold_ranges(pg_snapshot, pg_snapshot) IS
$$The transactions a pass reads, as ranges of xids in order: each one the last pass saw running that committed by this pass's snapshot, then the xids between the two snapshots' horizons less those running at this pass's start. So a transaction that commits late is folded by the pass that first sees it committed, never skipped.$$;
COMMENT ON FUNCTION sitemap_fold_read(xid8, xid8, xid8, bigint, bigint, bigint) IS
$$Reads into sitemap_fold_rows, in (change_xid, id) order, at most max_rows changed rows with change_xid in [low, high] after (after_xid, after_id), each marked with whether it may have a placement (no row past newest_placed has one); returns how many. Planned as an ordered walk of the index: a sort or a bitmap of the whole range would read all of it every batch.$$;
COMMENT ON FUNCTION sitemap_apply_deltas(text[], text[], integer[], bigint[], bigint[], bigint[], bigint[], bigint[]) IS
$$Adds per-page deltas (URLs, bytes, extension entries) to the summaries in sitemap_pages, and moves each listed page's lastmod forward; a zero delta is a change in place.$$;
COMMENT ON FUNCTION sitemap_unplace(bigint[]) IS
$$Takes the rows ids off their pages, alone or in runs, subtracts them from their pages' summaries, and queues them in sitemap_unplaced to be placed again.$$;
COMMENT ON FUNCTION sitemap_explode(bigint[], boolean) IS
$$Takes the rows wanted out of the runs they stand in; the rest of each run stays a run. With place_alone, each gets a placement of its own on the same page with the same reservation, and pages and summaries are unchanged; without, they are off their pages and the caller subtracts them from their summaries.$$;
COMMENT ON FUNCTION sitemap_run_members(bigint[]) IS
$$Which of the rows wanted stand in a run: the run, where it is, and what each was placed with. Few rows are looked up by id, one index probe each; many (a bulk update or delete) by reading the runs over their ids once and joining.$$;
COMMENT ON FUNCTION sitemap_placement_of(bigint) IS
$$The placement of one row, alone or in a run: a probe of each by its index (sitemap_placed filtered by id would unnest every run).$$;
COMMENT ON FUNCTION sitemap_rebuild_clusters() IS
$$Part of a fold: rebuilds the hreflang clusters listed in sitemap_fold_clusters from the rows that name them, and marks those whose served links changed, so their members' pages change too.$$;
COMMENT ON FUNCTION sitemap_write_out_feed(integer) IS
$$Writes the oldest max_rows rows of sitemap_change_stash out to sitemap_changes, in order; returns how many entries. Run by one writer at a time (it locks sitemap_feed_writer first): all of it or none, never ahead of an older row.$$;
COMMENT ON FUNCTION sitemap_loc_hash(text) IS
$$How a placement remembers the loc it was placed with: a row whose loc hashes otherwise is another URL now. Not STRICT, so it is inlined.$$;
COMMENT ON FUNCTION sitemap_loc_in_scope(text, text, text) IS
$$Whether a loc is served under a site's origin and path prefix: same scheme and host (case-insensitive), a path under the prefix, and no dot segment that would climb out of it. The usual loc, which starts with the origin and prefix as written and has no "/.", is decided by two byte comparisons.$$;

-- News.

COMMENT ON FUNCTION sitemap_refresh_news(timestamp with time zone, boolean) IS
$$Lists every site's news files anew for the window ending at window_end when changed (rows were folded) or an article is due to leave; a file whose articles differ from the last listing gets a new lastmod.$$;
COMMENT ON FUNCTION sitemap_news_listing(text, timestamp with time zone) IS
$$A site's placed articles first published in the 48 hours before window_end, numbered newest first (n) as the news files list them, with the bytes each entry takes.$$;
COMMENT ON FUNCTION sitemap_news_published(jsonb) IS
$$When an article was first published, as stored; deterministic, as the CHECK admits only W3C datetimes.$$;
COMMENT ON FUNCTION sitemap_news_entry_bytes(text, jsonb) IS
$$The most bytes an article's entry takes in a news sitemap: a page entry's reserve for its loc, and its news element as the writer writes it.$$;

-- Sizes, mirrored by the XML writer (whose tests hold the two equal).

COMMENT ON FUNCTION sitemap_entry_bytes(text) IS
$$The bytes a <url> entry with this loc may take with every optional element at its longest: what a page reserves for it. ASCII locs without an XML special character take the first branch.$$;
COMMENT ON FUNCTION sitemap_served_chars(text) IS
$$A loc's length as served, where every non-ASCII byte is written as %XX (three characters): the protocol's 2,048 characters apply to that.$$;
COMMENT ON FUNCTION sitemap_url_bytes(text) IS
$$Bytes of a URL as the writer emits it: the five XML entities escaped, non-ASCII percent-encoded.$$;
COMMENT ON FUNCTION sitemap_text_bytes(text) IS
$$Bytes of a text as the writer emits it: the five XML entities escaped.$$;
COMMENT ON FUNCTION sitemap_video_bytes(jsonb) IS
$$The most bytes one video's element takes: tags as written, values at their longest where the writer formats them (a duration 5 bytes, a rating 5, yes / no 3).$$;
COMMENT ON FUNCTION sitemap_media_bytes(jsonb, jsonb) IS
$$The bytes of an entry's image and video elements: 0 without either, as most rows are, before any JSON is read.$$;
COMMENT ON FUNCTION sitemap_media_elements_bytes(jsonb, jsonb) IS
$$The bytes of an entry's image and video elements as the writer writes them; sitemap_media_bytes calls it only for rows that have either.$$;

-- The extensions' CHECK constraints: each refuses a bad value through
-- sitemap_refuse, naming the field and the rule as the service's validator
-- words them.

COMMENT ON FUNCTION sitemap_refuse(text, text, text) IS
$$Raises check_violation naming the field, the value (cut to 100 characters) and the rule, as the service's validator words it. Called by the sitemap_check_* functions.$$;
COMMENT ON FUNCTION sitemap_check_keys(text, jsonb, text[], text[]) IS
$$Refuses keys of an object outside allowed; those Google deprecated in 2022 (deprecated) with that reason.$$;
COMMENT ON FUNCTION sitemap_check_url(text, jsonb) IS
$$Refuses a value that is not an absolute http(s) URL with a host, without whitespace or control characters, at most 2,048 characters as served (the rule of <loc>).$$;
COMMENT ON FUNCTION sitemap_check_text(text, jsonb, integer) IS
$$Refuses a value that is not a non-empty string of at most max_chars characters without control characters (XML cannot carry them).$$;
COMMENT ON FUNCTION sitemap_check_boolean(text, jsonb) IS
$$Refuses a value that is not a JSON boolean (served as yes / no).$$;
COMMENT ON FUNCTION sitemap_check_datetime(text, jsonb) IS
$$Refuses a value that is not a W3C datetime the extensions' schemas accept (sitemap_w3c_datetime).$$;
COMMENT ON FUNCTION sitemap_w3c_datetime(text) IS
$$A date, or a date and time to the second with a zone: the W3C datetimes that are also XML Schema dates and dateTimes, which crawlers validate the extensions against. Returns the instant (a date alone is midnight UTC), or NULL.$$;
COMMENT ON FUNCTION sitemap_check_images(jsonb) IS
$$The CHECK of sitemap_urls.images: an array of at most 1,000 objects, each with a loc URL and no other key.$$;
COMMENT ON FUNCTION sitemap_check_videos(text, jsonb) IS
$$The CHECK of sitemap_urls.videos: an array of video objects with the keys, types and ranges of Google's video extension (thumbnail_loc, title, description, and a content_loc or player_loc that is not the page's own loc).$$;
COMMENT ON FUNCTION sitemap_check_news(jsonb) IS
$$The CHECK of sitemap_urls.news: an object with publication_name, language (ISO 639, or zh-cn / zh-tw), publication_date (a W3C datetime, not in the future) and title, as Google's news extension has them.$$;
COMMENT ON FUNCTION sitemap_check_hreflang(text[], text) IS
$$The CHECK of sitemap_urls.hreflang and hreflang_cluster: set together; a cluster name of 1 to 256 characters; each code an ISO 639-1 language, optionally with an ISO 3166-1 alpha-2 region, or x-default, matched case-insensitively as crawlers do.$$;
COMMENT ON FUNCTION sitemap_iso_languages() IS
$$ISO 639-1 language codes (lower case).$$;
COMMENT ON FUNCTION sitemap_iso_countries() IS
$$ISO 3166-1 alpha-2 country codes (upper case).$$;
