//! The page cache: built pages' compressed bytes, so an unchanged page is
//! never rebuilt.
//!
//! A page's key includes its version (the change time its summary keeps,
//! strictly increasing per page), so a changed page can never be answered
//! from an older build: it simply has a new key, and the old entry ages out.
//! Memory is bounded by a byte budget (LRU); an optional disk tier keeps one
//! file per page and encoding, so a restart or an entry evicted from memory
//! costs a file read rather than a rebuild.
//!
//! A cold page is built once however many requests ask for it at the same
//! time: they wait for that one build (how builds are bounded is the
//! builder's business: see `render`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use moka::future::Cache;
use moka::policy::EvictionPolicy;
use time::OffsetDateTime;

use crate::pages::codec::Codec;

/// A built page: the chunks its compressor produced, kept as they are.
/// Many similar small allocations, rather than one large block per page,
/// let freed pages be reused instead of fragmenting the heap (one block per
/// page measured 135 MiB of RSS for a 64 MiB cache; chunks stay near it).
pub(crate) type Chunks = Arc<[Bytes]>;

/// A page's size in bytes.
pub(crate) fn total_len(chunks: &Chunks) -> usize {
    chunks.iter().map(Bytes::len).sum()
}

/// Identifies one build of one page in one encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PageKey {
    pub(crate) site: String,
    pub(crate) section: String,
    pub(crate) page: i32,
    pub(crate) codec: Codec,
    /// The page's change time: its version.
    pub(crate) version: OffsetDateTime,
}

/// Where a page's bytes came from, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Memory, or another request's build that this one waited for.
    Memory,
    Disk,
    Built,
}

impl Source {
    /// The metrics label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Source::Memory => "memory",
            Source::Disk => "disk",
            Source::Built => "built",
        }
    }
}

#[derive(Debug)]
pub(crate) struct PageCache {
    memory: Cache<PageKey, Chunks>,
    dir: Option<PathBuf>,
}

impl PageCache {
    /// Keeps up to `memory_bytes` of pages in memory, and every page in
    /// `dir` too when given.
    pub(crate) fn new(memory_bytes: u64, dir: Option<PathBuf>) -> PageCache {
        let memory = Cache::builder()
            .max_capacity(memory_bytes)
            .weigher(|_key: &PageKey, body: &Chunks| {
                u32::try_from(total_len(body)).unwrap_or(u32::MAX)
            })
            .eviction_policy(EvictionPolicy::lru())
            .support_invalidation_closures()
            .build();
        PageCache { memory, dir }
    }

    /// The page's bytes: from memory, else from disk, else built by `build`
    /// and kept. Concurrent callers with the same key share one lookup and
    /// one build (and its error). A hit is answered before the key is ever
    /// cloned.
    pub(crate) async fn get_or_build<F, Fut, E>(
        &self,
        key: PageKey,
        build: F,
    ) -> Result<(Chunks, Source), Arc<E>>
    where
        F: FnOnce(&PageKey) -> Fut,
        Fut: Future<Output = Result<Chunks, E>>,
        E: Send + Sync + 'static,
    {
        if let Some(body) = self.memory.get(&key).await {
            return Ok((body, Source::Memory));
        }
        let mut source = Source::Memory;
        let body = self
            .memory
            .try_get_with(key.clone(), async {
                if let Some(body) = self.read_disk(&key).await {
                    source = Source::Disk;
                    return Ok(body);
                }
                let body = build(&key).await?;
                source = Source::Built;
                self.write_disk(&key, &body).await;
                Ok::<_, E>(body)
            })
            .await?;
        Ok((body, source))
    }

    /// Drops every page of the site `name`, from memory and disk: what
    /// removing the site, or moving it, leaves behind.
    pub(crate) fn forget_site(&self, name: &str) {
        let site = name.to_owned();
        if let Err(error) = self
            .memory
            .invalidate_entries_if(move |key, _| key.site == site)
        {
            tracing::warn!(%error, "page cache: could not drop a site's pages");
        }
        if let Some(dir) = &self.dir {
            let folder = dir.join(name);
            tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&folder) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!(%error, folder = %folder.display(), "page cache: could not drop a site's pages from disk");
                }
                _ => {}
            });
        }
    }

    /// Bytes held in memory now (eventually consistent).
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.memory.weighted_size()
    }

    async fn read_disk(&self, key: &PageKey) -> Option<Chunks> {
        let path = disk_path(self.dir.as_deref()?, key);
        let version = key.version.unix_timestamp_nanos();
        tokio::task::spawn_blocking(move || {
            let file = Bytes::from(std::fs::read(&path).ok()?);
            let stamp = file.get(..16)?;
            (i128::from_le_bytes(stamp.try_into().ok()?) == version)
                .then(|| Chunks::from([file.slice(16..)]))
        })
        .await
        .ok()
        .flatten()
    }

    /// Keeps the page on disk, replacing the page's older build; a failure
    /// only costs a rebuild later, so it is logged, not returned.
    async fn write_disk(&self, key: &PageKey, body: &Chunks) {
        let Some(dir) = self.dir.as_deref() else {
            return;
        };
        let path = disk_path(dir, key);
        let (version, body) = (key.version.unix_timestamp_nanos(), body.clone());
        let written = tokio::task::spawn_blocking(move || {
            let folder = path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(folder)?;
            // Renamed into place once whole, so a reader never sees half a
            // page; removed if anything fails before.
            let mut file = tempfile::NamedTempFile::new_in(folder)?;
            file.write_all(&version.to_le_bytes())?;
            for chunk in body.iter() {
                file.write_all(chunk)?;
            }
            file.as_file().sync_data()?;
            file.persist(&path).map(drop).map_err(|e| e.error)
        })
        .await;
        if let Ok(Err(error)) | Err(error) = written.map_err(std::io::Error::other) {
            tracing::warn!(%error, "page cache: could not write the disk tier");
        }
    }
}

/// One file per (site, section, page, encoding); its first 16 bytes are
/// the version it holds.
fn disk_path(dir: &Path, key: &PageKey) -> PathBuf {
    let section = if key.section.is_empty() {
        "_"
    } else {
        &key.section
    };
    dir.join(&key.site)
        .join(format!("{section}-{}.{}", key.page, key.codec.token()))
}
