//! The `sitemapd` binary: its commands are in [`cli`].

mod cli;

use std::process::ExitCode;

/// jemalloc, with a background thread that hands freed memory back to the
/// system within about a second (`.cargo/config.toml`), so RSS falls again
/// once a flood of clients has gone, however idle the service then is.
/// glibc's malloc kept most of a flood's peak, and mimalloc only gave it
/// back when the threads that freed it allocated again (docs/operations.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    cli::main().await
}
