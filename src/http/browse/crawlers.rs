//! What the view shows operators of the crawler ledger: for each page,
//! when each verified crawler last read it and whether it holds the
//! current version; and the Crawlers section, with its plot.

use std::collections::{BTreeMap, HashMap};

use maud::{Markup, html};
use time::{Duration, OffsetDateTime};

use super::plot::{self, Series};
use super::{count, datetime};
use crate::http::ledger::{Holding, holdings};
use crate::http::{HttpError, HttpState};
use crate::site::Site;
use crate::sitemap::PageName;

/// Hours the plot shows.
const PLOT_HOURS: usize = 7 * 24;
/// Stale reads whose changed URLs are counted, at most, per view: each
/// count reads the page's rows.
const COUNTED_STALE_READS: usize = 100;

/// A verified crawler's last read of a page.
pub(super) struct PageRead {
    pub(super) crawler: String,
    pub(super) last_fetch: OffsetDateTime,
    pub(super) holds_current: bool,
    /// URLs of the page changed since (counted for the first stale reads).
    pub(super) changed_since: Option<i64>,
}

/// What the view shows of the ledger for one site.
pub(super) struct Crawled {
    /// By section and page, each crawler's last read, by crawler.
    pub(super) pages: HashMap<(String, i32), Vec<PageRead>>,
    holdings: Vec<Holding>,
}

impl Crawled {
    pub(super) async fn read(state: &HttpState, site: &Site) -> Result<Crawled, HttpError> {
        let holdings = holdings(state, Some(&site.name)).await?;
        let mut latest: BTreeMap<(String, i32, String), &Holding> = BTreeMap::new();
        for holding in holdings.iter().filter(|h| h.row.verified) {
            let Some((name, _)) = PageName::parse(&holding.row.file) else {
                continue;
            };
            if name.is_news() {
                continue;
            }
            let key = (name.section, name.page, holding.row.crawler.clone());
            let later = latest
                .get(&key)
                .is_none_or(|seen| seen.row.last_fetch < holding.row.last_fetch);
            if later {
                latest.insert(key, holding);
            }
        }
        let mut pages: HashMap<(String, i32), Vec<PageRead>> = HashMap::new();
        let mut counted = 0;
        for ((section, page, crawler), holding) in latest {
            let holds_current = holding.holds_current();
            let changed_since = if !holds_current && counted < COUNTED_STALE_READS {
                counted += 1;
                Some(
                    state
                        .store
                        .page_changes_since(&site.name, &section, page, holding.row.last_fetch)
                        .await?,
                )
            } else {
                None
            };
            pages.entry((section, page)).or_default().push(PageRead {
                crawler,
                last_fetch: holding.row.last_fetch,
                holds_current,
                changed_since,
            });
        }
        Ok(Crawled { pages, holdings })
    }
}

/// A page's cell: each verified crawler's last read.
pub(super) fn page_reads(reads: Option<&Vec<PageRead>>) -> Markup {
    html! {
        @match reads {
            None => span.muted { "not read yet" },
            Some(reads) => @for read in reads {
                div.read {
                    (read.crawler) " " (datetime(read.last_fetch)) " · "
                    @if read.holds_current {
                        span.current { "current" }
                    } @else {
                        span.stale {
                            "older version"
                            @if let Some(changed) = read.changed_since {
                                ", " (count(changed)) " URLs changed since"
                            }
                        }
                    }
                }
            },
        }
    }
}

/// The Crawlers section: the plot, and each crawler's fetches.
pub(super) async fn section(
    state: &HttpState,
    site: &Site,
    crawled: &Crawled,
) -> Result<Markup, HttpError> {
    let now = OffsetDateTime::now_utc();
    let this_hour = now
        .replace_minute(0)
        .and_then(|t| t.replace_second(0))
        .and_then(|t| t.replace_nanosecond(0))
        .unwrap_or(now);
    let start = this_hour - Duration::hours(PLOT_HOURS as i64 - 1);
    let counts = state.store.crawler_hours(&site.name, start).await?;
    let mut changes = vec![0; PLOT_HOURS];
    let mut series: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for hour_count in counts {
        let Ok(hour) = usize::try_from((hour_count.hour - start).whole_hours()) else {
            continue;
        };
        if hour >= PLOT_HOURS {
            continue;
        }
        let counts = if hour_count.series == "changes" {
            &mut changes
        } else {
            series
                .entry(hour_count.series)
                .or_insert_with(|| vec![0; PLOT_HOURS])
        };
        counts[hour] += hour_count.count;
    }
    let series: Vec<Series> = series
        .into_iter()
        .map(|(crawler, counts)| Series { crawler, counts })
        .collect();
    let mut crawlers: BTreeMap<&str, CrawlerTotals> = BTreeMap::new();
    for holding in &crawled.holdings {
        let totals = crawlers.entry(&holding.row.crawler).or_default();
        totals.files += 1;
        totals.current += i64::from(holding.holds_current());
        totals.fetches += holding.row.fetches;
        totals.last_fetch = totals.last_fetch.max(Some(holding.row.last_fetch));
    }
    Ok(html! {
        h2 #crawlers { "Crawlers" }
        p.note {
            "Fetches of this site's sitemap files per hour over the last 7 days, by crawler, "
            "under the URL changes per hour from the change feed. A crawler's user agent from "
            "an address outside its published ranges counts as unverified."
        }
        (plot::hourly(start, PLOT_HOURS, &changes, &series))
        @if crawlers.is_empty() {
            p { "No crawler has fetched a sitemap file of this site yet." }
        } @else {
            table {
                thead { tr {
                    th { "Crawler" } th { "Last fetch" } th.n { "Files" }
                    th.n { "Holding the current version" } th.n { "Fetches" }
                } }
                tbody {
                    @for (crawler, totals) in &crawlers {
                        tr {
                            td { (crawler) }
                            td.t { @if let Some(at) = totals.last_fetch { (datetime(at)) } }
                            td.n { (count(totals.files)) }
                            td.n { (count(totals.current)) }
                            td.n { (count(totals.fetches)) }
                        }
                    }
                }
            }
        }
    })
}

#[derive(Default)]
struct CrawlerTotals {
    files: i64,
    current: i64,
    fetches: i64,
    last_fetch: Option<OffsetDateTime>,
}
