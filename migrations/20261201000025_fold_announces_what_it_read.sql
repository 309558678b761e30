-- The service writes the 'added' feed entries of the rows a fold places.
--
-- sitemap_fold_announce read sitemap_fold_unplaced again for them, after
-- the service had read it: the locs once more, a hash of the rows by site
-- to count them and one to group them, then an array of each group's
-- locs. On 80,000 new rows that took 100 of its 110 ms; the stash's
-- insert was the rest. The service has every row's loc from its own read
-- (it now reads them all, not only those a robots judge needs) and writes
-- the entries with a binary COPY: to sitemap_changes, or, for a fold that
-- keeps its entries, to sitemap_change_stash grouped as before (a row per
-- site, or per 10,000 ids for a site with more than 10,000 entries, in the
-- order of their lowest ids). See src/store/fold.rs, announce_added.

DROP FUNCTION sitemap_fold_announce(bigint[]);

COMMENT ON FUNCTION sitemap_fold_end(OUT folded bigint, OUT caught_up boolean) IS
$$The last step of a fold: adds the page deltas to the summaries (sitemap_apply_deltas) and records how far the pass has read, or the lane folded (nothing, for a fold of removals only). Returns how many rows the fold placed, changed in place or took off a page, and whether it caught up: its pass is done, no removal is left and no row waits to be placed again.$$;
