//! How long a committed write takes to show in its page, under load.
//!
//! Against a running `sitemapd serve` and its database: writers commit
//! single-row upserts at `--rate` per second while a probe commits one new
//! row every 250 ms into section `probe` and polls that section's page until
//! the row is served. Prints the probe delays' median, p99 and maximum.
//!
//! ```sh
//! cargo run --release --example visibility -- \
//!     --database-url postgres://postgres@127.0.0.1/sitemapd_bench \
//!     --server http://127.0.0.1:8080 --base-url https://www.example.com/ \
//!     --rate 1000 --seconds 60
//! ```

use std::io::Read;
use std::time::{Duration, Instant};

use clap::Parser;
use sqlx::postgres::PgPoolOptions;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    database_url: String,
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    server: String,
    /// The served site's base URL (the rows' locs start with it).
    #[arg(long)]
    base_url: String,
    /// Committed writes per second, besides the probe's.
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    #[arg(long, default_value_t = 60)]
    seconds: u64,
}

const WRITERS: u64 = 8;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let pool = PgPoolOptions::new()
        .max_connections(WRITERS as u32 + 2)
        .connect(&args.database_url)
        .await?;
    let run_for = Duration::from_secs(args.seconds);
    let started = Instant::now();
    let per_writer = Duration::from_secs_f64(WRITERS as f64 / args.rate as f64);

    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let pool = pool.clone();
            let base = args.base_url.clone();
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(per_writer);
                let mut written = 0_u64;
                let mut n = writer;
                while started.elapsed() < run_for {
                    ticker.tick().await;
                    n = (n * 6_364_136_223_846_793_005 + 1_442_695_040_888_963_407) % 200_000;
                    sqlx::query(
                        "INSERT INTO sitemap_urls (section, loc, lastmod) VALUES ('load', $1, now())
                         ON CONFLICT (site, loc) DO UPDATE SET lastmod = excluded.lastmod",
                    )
                    .bind(format!("{base}load/{n}"))
                    .execute(&pool)
                    .await?;
                    written += 1;
                }
                anyhow::Ok(written)
            })
        })
        .collect();

    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let page = format!("{}/sitemap-probe-1.xml.gz", args.server);
    let run_id = std::process::id();
    let mut delays = Vec::new();
    let mut probe = 0;
    while started.elapsed() < run_for {
        probe += 1;
        let loc = format!("{}probe/{run_id}/{probe}", args.base_url);
        sqlx::query("INSERT INTO sitemap_urls (section, loc) VALUES ('probe', $1)")
            .bind(&loc)
            .execute(&pool)
            .await?;
        let committed = Instant::now();
        loop {
            let response = client.get(&page).send().await?;
            if response.status() == 200 {
                let mut xml = String::new();
                flate2::read::GzDecoder::new(&response.bytes().await?[..])
                    .read_to_string(&mut xml)?;
                if xml.contains(&loc) {
                    break;
                }
            }
            anyhow::ensure!(
                committed.elapsed() < Duration::from_secs(30),
                "{loc} not served within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        delays.push(committed.elapsed());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut written = 0;
    for writer in writers {
        written += writer.await??;
    }
    delays.sort();
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    println!(
        "writes: {written} in {:.1} s ({:.0}/s); probes: {}; delay p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        started.elapsed().as_secs_f64(),
        written as f64 / started.elapsed().as_secs_f64(),
        delays.len(),
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        delays.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    );
    Ok(())
}
