//! The Crawlers plot: fetches per hour by crawler over the last days,
//! under URL changes per hour, as inline SVG drawn here (a few lines and
//! bars need no charting library, and the view stays free of scripts and
//! external assets). Each series carries its name and total, so that what
//! it shows can be checked.

use maud::{Markup, html};
use time::{Duration, OffsetDateTime};

/// One line: a crawler's fetches, one count per hour, oldest first.
pub(super) struct Series {
    pub(super) crawler: String,
    pub(super) counts: Vec<i64>,
}

const WIDTH: f64 = 880.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 120.0;
const CHANGES_TOP: f64 = 24.0;
const CHANGES_HEIGHT: f64 = 70.0;
const FETCHES_TOP: f64 = 130.0;
const FETCHES_HEIGHT: f64 = 150.0;
const HEIGHT: f64 = 310.0;

/// A color for each crawler, stable across views.
fn color(crawler: &str) -> &'static str {
    match crawler {
        "googlebot" => "#1a73e8",
        "bingbot" => "#00897b",
        "yandex" => "#e53935",
        "applebot" => "#555555",
        "duckduckbot" => "#f57c00",
        "baiduspider" => "#3949ab",
        "petalbot" => "#c2185b",
        "seznambot" => "#7cb342",
        "naver" => "#00c73c",
        "unverified" => "#b71c1c",
        _ => "#9e9e9e",
    }
}

/// The plot of `hours` hours from `start`: `changes` per hour as bars
/// above, each series as a line below.
pub(super) fn hourly(
    start: OffsetDateTime,
    hours: usize,
    changes: &[i64],
    series: &[Series],
) -> Markup {
    let plot_width = WIDTH - LEFT - RIGHT;
    let step = plot_width / hours.max(1) as f64;
    let x = |hour: usize| LEFT + step * (hour as f64 + 0.5);
    let most_changes = changes.iter().copied().max().unwrap_or(0).max(1);
    let most_fetches = series
        .iter()
        .flat_map(|s| s.counts.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let fetch_y =
        |count: i64| FETCHES_TOP + FETCHES_HEIGHT * (1.0 - count as f64 / most_fetches as f64);
    let days: Vec<(f64, String)> = (0..=hours)
        .filter(|hour| (start + Duration::hours(*hour as i64)).hour() == 0 && *hour < hours)
        .map(|hour| {
            let day = (start + Duration::hours(hour as i64)).date();
            (
                LEFT + step * hour as f64,
                format!("{:02}-{:02}", u8::from(day.month()), day.day()),
            )
        })
        .collect();
    let total_changes: i64 = changes.iter().sum();
    html! {
        svg.plot xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(HEIGHT)
            viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
            aria-label="Sitemap fetches per hour by crawler, under URL changes per hour" {
            rect x="0" y="0" width=(WIDTH) height=(HEIGHT) fill="#ffffff" {}
            text x=(LEFT) y="14" font-size="12" fill="#444" {
                "URL changes per hour (most: " (most_changes) ")"
            }
            text x=(LEFT) y=(FETCHES_TOP - 8.0) font-size="12" fill="#444" {
                "Sitemap fetches per hour (most: " (most_fetches) ")"
            }
            @for (day_x, label) in &days {
                line x1=(day_x) x2=(day_x) y1=(CHANGES_TOP) y2=(FETCHES_TOP + FETCHES_HEIGHT)
                    stroke="#eeeeee" {}
                text x=(day_x + 2.0) y=(HEIGHT - 12.0) font-size="11" fill="#666" { (label) }
            }
            line x1=(LEFT) x2=(WIDTH - RIGHT) y1=(CHANGES_TOP + CHANGES_HEIGHT)
                y2=(CHANGES_TOP + CHANGES_HEIGHT) stroke="#999" {}
            line x1=(LEFT) x2=(WIDTH - RIGHT) y1=(FETCHES_TOP + FETCHES_HEIGHT)
                y2=(FETCHES_TOP + FETCHES_HEIGHT) stroke="#999" {}
            g.series data-series="changes" data-total=(total_changes) {
                title { "URL changes: " (total_changes) }
                @for (hour, &count) in changes.iter().enumerate() {
                    @if count > 0 {
                        @let height = CHANGES_HEIGHT * count as f64 / most_changes as f64;
                        rect x=(LEFT + step * hour as f64) y=(CHANGES_TOP + CHANGES_HEIGHT - height)
                            width=(step.max(1.0)) height=(height) fill="#bdbdbd" {}
                    }
                }
            }
            @for (index, line) in series.iter().enumerate() {
                @let total: i64 = line.counts.iter().sum();
                @let points = line.counts.iter().enumerate()
                    .map(|(hour, &count)| format!("{:.1},{:.1}", x(hour), fetch_y(count)))
                    .collect::<Vec<_>>().join(" ");
                g.series data-series=(line.crawler) data-total=(total) {
                    title { (line.crawler) ": " (total) " fetches" }
                    polyline points=(points) fill="none" stroke=(color(&line.crawler))
                        stroke-width="1.5" {}
                    rect x=(WIDTH - RIGHT + 12.0) y=(FETCHES_TOP + 16.0 * index as f64)
                        width="10" height="10" fill=(color(&line.crawler)) {}
                    text x=(WIDTH - RIGHT + 26.0) y=(FETCHES_TOP + 9.0 + 16.0 * index as f64)
                        font-size="11" fill="#333" { (line.crawler) " (" (total) ")" }
                }
            }
        }
    }
}
