//! The command line: each command in a module of its own, over the library.
//! Errors end here, as `anyhow`, printed once with their causes.

mod demo;
mod fold;
mod health;
mod import;
mod progress;
mod robots;
mod serve;
mod sites;
mod submit;
mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sitemapd::config::Config;
use sitemapd::store::{Store, Turn, Workload};

/// The version, and the commit the binary was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("BUILT_FROM_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    version = VERSION,
    about = "Always-current XML sitemaps served from PostgreSQL"
)]
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
    Import(import::Args),
    /// Exit 0 if the service on `listen` answers its /healthz (for container
    /// health checks, which may have no shell or curl).
    Health,
    /// Mint a write API token: prints the token (give it to the writer) and
    /// its digest. An operator's digest goes in api_token_hashes; a site's
    /// (--site NAME) is stored with the site.
    Token(token::Args),
    /// Create, change, remove and list the sites.
    #[command(subcommand)]
    Sites(Box<sites::Command>),
    /// Tell search engines now: send the IndexNow backlog without waiting,
    /// and submit each index to the submit_urls. Exit code 1 when an
    /// endpoint did not take what was sent.
    Submit(submit::Args),
    /// Place every change committed so far, in batches of fold_batch_rows,
    /// and write out the change feed, then exit: what a running service does
    /// a few times a second, for a bulk load placed before the service
    /// starts. Prints each batch: rows folded and seconds taken.
    Fold,
    /// Fill the table with realistic synthetic URLs under a configured site.
    Demo(demo::Args),
}

/// Runs the command line; exit code 2 on an error.
pub(crate) async fn main() -> ExitCode {
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
    sitemapd::telemetry::init(config.settings.log_format);
    match cli.command {
        Command::Serve => serve::run(&config).await?,
        Command::Migrate => {
            connect(&config, Workload::Serving).await?;
            tracing::info!("database migrated and configured");
        }
        Command::Robots => robots::run(&config).await?,
        Command::Import(args) => return import::run(&config, args).await,
        Command::Health => health::run(config.settings.listen).await?,
        Command::Token(args) => token::run(&config, args).await?,
        Command::Sites(command) => sites::run(&config, *command).await?,
        Command::Submit(args) => return submit::run(&config, args).await,
        Command::Fold => fold::run(&config).await?,
        Command::Demo(args) => demo::run(&config, args).await?,
    }
    Ok(ExitCode::SUCCESS)
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

/// The database, migrated, with the configuration applied to its schema.
async fn connect(config: &Config, workload: Workload) -> anyhow::Result<Store> {
    let store = open(config, workload).await?;
    sitemapd::apply_config(&store, config).await?;
    Ok(store)
}

/// The database as `serve` starts on it: migrated, configured, and every
/// change committed so far placed, so what a command reads is what the
/// service serves.
async fn connect_placed(config: &Config) -> anyhow::Result<Store> {
    let store = connect(config, Workload::Serving)
        .await?
        .with_fold_batch_rows(config.settings.fold_batch_rows)
        .with_fold_memory_bytes(config.settings.fold_memory_bytes);
    store.fold(Turn::Wait).await?;
    Ok(store)
}
