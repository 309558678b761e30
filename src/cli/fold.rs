//! `sitemapd fold`: places a bulk load before the service starts.

use std::time::Instant;

use sitemapd::config::Config;
use sitemapd::store::{Turn, Workload};

pub(super) async fn run(config: &Config) -> anyhow::Result<()> {
    let store = super::connect(config, Workload::Bulk)
        .await?
        .with_fold_batch_rows(config.settings.fold_batch_rows)
        .with_fold_memory_bytes(config.settings.fold_memory_bytes);
    fold_everything(&store).await
}

/// Folds batch after batch until every change committed before the call is
/// placed, then writes out the feed entries folds kept; prints each step.
async fn fold_everything(store: &sitemapd::store::Store) -> anyhow::Result<()> {
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
