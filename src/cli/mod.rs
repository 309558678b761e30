//! The `sitemapd` binary: parse the command line, load configuration, call
//! the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sitemapd::config::Config;
use sitemapd::sitemap::name::parse_slug;
use sitemapd::store::{Store, Turn, Workload};
use std::process::ExitCode;
use std::time::Instant;

use sitemapd::ingest::formats::Input;
use sitemapd::ingest::import::{self, ImportOptions, ImportReport};
use tokio::net::TcpListener;

/// jemalloc, with a background thread that hands freed memory back to the
/// system within about a second (`.cargo/config.toml`), so RSS falls again
/// once a flood of clients has gone, however idle the service then is.
/// glibc's malloc kept most of a flood's peak, and mimalloc only gave it
/// back when the threads that freed it allocated again (RELIABILITY.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(version, about = "Always-current XML sitemaps served from PostgreSQL")]
struct Cli {
    /// A TOML file layered over the built-in defaults (environment variables
    /// still win over it).
    #[arg(long, global = true, env = "SITEMAPD_CONFIG_FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the sitemaps (creates the database and migrates it first).
    Serve,
    /// Create the database if missing, apply migrations and configuration, exit.
    Migrate,
    /// Print the robots.txt lines that make crawlers find every site's index
    /// files (as many as each site has now).
    Robots,
    /// Import records from a file: all or nothing unless --skip-invalid.
    /// Exit code 0 when clean, 1 when records were rejected, 2 on a usage or
    /// I/O error.
    Import {
        /// The file, or - for standard input (gzip is recognised).
        file: String,
        #[command(flatten)]
        options: ImportOptions,
    },
    /// Exit 0 if the service on `listen` answers its /healthz (for container
    /// health checks, which may have no shell or curl).
    Health,
    /// Mint a write API token: prints the token (give it to the writer; it
    /// is not stored anywhere) and the digest to add to api_token_hashes.
    Token,
    /// Tell search engines now: send the IndexNow backlog without waiting,
    /// and submit each index to the submit_urls. Exit code 1 when an
    /// endpoint did not take what was sent.
    Submit {
        /// Print what would be sent next, and send nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Place every change committed so far, in batches of fold_batch_rows,
    /// and write out the change feed, then exit: what a running service does
    /// a few times a second, for a bulk load placed before the service
    /// starts. Prints each batch: rows folded and seconds taken.
    Fold,
    /// Fill the table with realistic synthetic URLs under a configured site.
    Demo {
        /// How many URLs to add.
        #[arg(long)]
        urls: u64,
        /// Which site (default: the primary one).
        #[arg(long)]
        site: Option<String>,
        /// Sections to spread them over, comma-separated (default section if none).
        #[arg(long, value_delimiter = ',', value_parser = parse_slug)]
        sections: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = Config::load(cli.config.as_deref())?;
    let settings = &config.settings;
    sitemapd::telemetry::init(settings.log_format);

    match cli.command {
        Command::Robots => {
            // Sites with more pages than an index file lists have several:
            // the database says how many there are now.
            let state = serving_state(&config).await?;
            for site in state.sites.all().iter().filter(|s| !state.sites.is_held(s)) {
                let members = state.sites.index_members(site);
                let files = state.pages.announced_indexes(&members).await?;
                for line in sitemapd::pages::sitemap_lines(site, &files, state.pages.index_format) {
                    println!("{line}");
                }
            }
        }
        Command::Health => health(settings.listen).await?,
        Command::Token => {
            let (token, hash) =
                sitemapd::tokens::mint().context("reading random bytes for the token")?;
            println!("token: {token}");
            println!("hash:  {hash}");
            eprintln!(
                "Add the hash to api_token_hashes; send the token as Authorization: Bearer <token>."
            );
        }
        Command::Import { file, options } => {
            let input = if file == "-" {
                Input::Stdin
            } else {
                Input::File(file.into())
            };
            // The file is read while the database is reached.
            let reading =
                import::begin(&config.sites, input, &options, sitemapd::progress::import())?;
            let store = connect(&config, Workload::Bulk).await?;
            let report = reading.finish(&store).await?;
            print_report(&report, &options);
            if report.invalid > 0 {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Serve => {
            sitemapd::http::raise_open_files_limit();
            let state = serving_state(&config).await?;
            let metrics_listener = match settings.metrics_listen {
                Some(address) => Some(
                    TcpListener::bind(address)
                        .await
                        .with_context(|| format!("listening on {address} (metrics_listen)"))?,
                ),
                None => None,
            };
            let listener = TcpListener::bind(settings.listen)
                .await
                .with_context(|| format!("listening on {}", settings.listen))?;
            for site in state.sites.all() {
                tracing::info!(
                    listen = %listener.local_addr()?,
                    site = %site.name,
                    index = %format!("{}sitemap_index.xml", site.base_url),
                    "serving sitemaps"
                );
            }
            sitemapd::serve(listener, metrics_listener, state, shutdown_signal()).await?;
        }
        Command::Submit { dry_run } => {
            let state = serving_state(&config).await?;
            let (lines, all_taken) = state.announcers.submit_now(dry_run).await?;
            for line in lines {
                println!("{line}");
            }
            if !all_taken {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Fold => {
            let store = connect(&config, Workload::Bulk)
                .await?
                .with_fold_batch_rows(settings.fold_batch_rows);
            fold_everything(&store).await?;
        }
        Command::Migrate => {
            connect(&config, Workload::Serving).await?;
            tracing::info!("database migrated and configured");
        }
        Command::Demo {
            urls,
            site,
            sections,
        } => {
            let store = connect(&config, Workload::Bulk).await?;
            let site = match site {
                None => config.primary_site(),
                Some(name) => config
                    .sites
                    .iter()
                    .find(|s| s.name == name)
                    .with_context(|| format!("--site {name}: no such site in the configuration"))?,
            };
            let seeded = sitemapd::demo::seed(
                &store,
                site,
                &sections,
                urls,
                sitemapd::progress::rows(urls),
            )
            .await?;
            let per_second = seeded.rows as f64 / seeded.elapsed.as_secs_f64().max(1e-9);
            tracing::info!(
                rows = seeded.rows,
                elapsed_ms = seeded.elapsed.as_millis() as u64,
                rows_per_second = per_second.round() as u64,
                "demo data ready"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &ImportReport, options: &ImportOptions) {
    for rejected in &report.rejected {
        let reasons: Vec<String> = rejected.errors.iter().map(ToString::to_string).collect();
        eprintln!("{}: {}", rejected.position, reasons.join("; "));
    }
    if report.invalid > report.rejected.len() as u64 {
        eprintln!(
            "… and {} more rejected records",
            report.invalid - report.rejected.len() as u64
        );
    }
    if !report.ignored.is_empty() {
        let ignored: Vec<String> = report
            .ignored
            .iter()
            .map(|(name, count)| format!("{name} ({count})"))
            .collect();
        eprintln!("ignored unknown fields: {}", ignored.join(", "));
    }
    if !report.dropped.is_empty() {
        let dropped: Vec<String> = report
            .dropped
            .iter()
            .map(|(element, count)| format!("{count} {element}"))
            .collect();
        eprintln!(
            "dropped, as sitemapd never serves them (Google deprecated most in 2022): {}",
            dropped.join(", ")
        );
    }
    let c = report.counts;
    let outcome = if report.written {
        "written"
    } else if options.dry_run {
        "dry run: nothing written"
    } else {
        "nothing written: fix the rejected records, or pass --skip-invalid to write the valid ones"
    };
    eprintln!(
        "{} records read, {} rejected; inserted {}, updated {}, unchanged {}, deleted {} ({outcome})",
        report.read, report.invalid, c.inserted, c.updated, c.unchanged, c.deleted
    );
}

/// Asks the local service for /healthz over plain HTTP/1.0.
async fn health(listen: std::net::SocketAddr) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut address = listen;
    if address.ip().is_unspecified() {
        address.set_ip(match address {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(3), exchange)
        .await
        .with_context(|| format!("no answer from {address} within 3 s"))??;
    anyhow::ensure!(
        answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200"),
        "{address}/healthz did not answer 200"
    );
    Ok(())
}

/// Connects (creating the database if missing) and migrates.
async fn open(config: &Config, workload: Workload) -> anyhow::Result<Store> {
    let settings = &config.settings;
    let url = settings.database_url.redacted();
    let store = Store::connect(settings, workload).await.map_err(|error| {
        let hint = if error.is_unreachable() {
            "\n\nIs PostgreSQL running there? Start it (`systemctl start postgresql`, or \
                 `pg_ctlcluster <version> main start`); or run `docker compose up -d postgres` \
                 in this repository and set \
                 DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/sitemapd; or set \
                 DATABASE_URL to a server that is running."
        } else {
            ""
        };
        anyhow::anyhow!("connecting to {url}: {error}{hint}")
    })?;
    store.migrate().await?;
    Ok(store)
}

/// Folds batch after batch until every change committed before the call is
/// placed, then writes out the feed entries folds kept; prints each step.
async fn fold_everything(store: &Store) -> anyhow::Result<()> {
    store
        .fold_batches(Turn::Wait, |batch, took| {
            println!(
                "folded {} rows in {:.3} s",
                batch.folded,
                took.as_secs_f64()
            );
        })
        .await?;
    let started = Instant::now();
    let written = store.write_out_feed(Turn::Wait).await?.unwrap_or(0);
    println!(
        "wrote {written} feed entries in {:.3} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The database, migrated, with the configuration applied to its schema.
async fn connect(config: &Config, workload: Workload) -> anyhow::Result<Store> {
    let store = open(config, workload).await?;
    sitemapd::apply_config(&store, config).await?;
    Ok(store)
}

/// What serving needs: the state the routes share, over the database with
/// the configuration applied.
async fn serving_state(config: &Config) -> anyhow::Result<sitemapd::AppState> {
    Ok(sitemapd::prepare(open(config, Workload::Serving).await?, config).await?)
}

/// Resolves on Ctrl-C or SIGTERM (what container runtimes send).
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight responses");
}
