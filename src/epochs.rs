//! Caches that a change notice empties, without ever keeping a read that
//! the change overtook: the site directory's and the page summaries'.
//!
//! Every drop moves a clock and stamps its key's bucket with it; a value
//! whose read began before the stamp is read again. Buckets are shared by
//! hashing, so a drop may also make a few unrelated keys read again, never
//! keep a stale one; but only while their read is new. A value is checked
//! against its bucket once, when first taken from the cache: a later drop
//! of its own key removes it, and one of another key in its bucket leaves
//! it be (checked on every use, 10,000 sites' summaries beside one busy
//! site were each read again about once per fold of it that shared their
//! bucket).

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::LocalKey;

use moka::Equivalent;
use moka::future::Cache;

#[derive(Debug)]
pub(crate) struct Epochs {
    /// Tells one instance's [`Recent`] values from another's.
    id: u64,
    clock: AtomicU64,
    buckets: Box<[AtomicU64]>,
    hasher: std::hash::RandomState,
}

/// Values found current since the clock last moved, kept by each thread in
/// front of a cache: most requests of a busy site take their value from
/// here, without the cache's bookkeeping of every read (hashing, an entry
/// in its read log, and its housekeeping), which took about a tenth of a
/// `304`'s CPU. Any drop moves the clock and so empties every table.
/// Hashed with foldhash, not SipHash: the table holds at most
/// [`RECENT_MOST`] values, so no choice of keys makes it slow, and SipHash
/// (here and in the request counters' family) took about 2% of a `304`'s
/// instructions.
#[derive(Debug)]
pub(crate) struct Recent<K, V> {
    owner: u64,
    clock: u64,
    values: HashMap<K, V, foldhash::fast::RandomState>,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Recent<K, V> {
        Recent {
            owner: 0,
            clock: 0,
            values: HashMap::default(),
        }
    }
}

/// Most values one thread keeps in front of one cache: a table that would
/// grow past it starts again.
const RECENT_MOST: usize = 64;

impl<K: Hash + Eq, V: Clone> Recent<K, V> {
    fn get<Q>(&self, owner: u64, clock: u64, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.owner != owner || self.clock != clock {
            return None;
        }
        self.values.get(key).cloned()
    }

    fn put(&mut self, owner: u64, clock: u64, key: K, value: V) {
        if self.owner == owner && self.clock > clock {
            // Found before a drop this table has already seen.
            return;
        }
        if self.owner != owner || self.clock != clock || self.values.len() >= RECENT_MOST {
            self.values.clear();
            self.owner = owner;
            self.clock = clock;
        }
        self.values.insert(key, value);
    }
}

/// A thread's table in front of one kind of cache.
pub(crate) type RecentTable<K, V> = LocalKey<RefCell<Recent<K, V>>>;

const EPOCH_BUCKETS: usize = 4096;

/// Tries at reading a value that changes keep overtaking, before it is
/// read once more and used without being kept.
const READ_TRIES: usize = 3;

/// A value with the epoch its read began in, and whether it was found
/// not overtaken.
#[derive(Debug, Clone)]
pub(crate) struct Read<V> {
    began: u64,
    checked: Arc<AtomicBool>,
    pub(crate) value: V,
}

impl Epochs {
    pub(crate) fn new() -> Epochs {
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        Epochs {
            id: INSTANCES.fetch_add(1, Ordering::Relaxed) + 1,
            clock: AtomicU64::new(0),
            buckets: (0..EPOCH_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            hasher: std::hash::RandomState::new(),
        }
    }

    fn now(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    fn bucket(&self, key: &impl Hash) -> &AtomicU64 {
        &self.buckets[self.hasher.hash_one(key) as usize % EPOCH_BUCKETS]
    }

    fn stale(&self, key: &impl Hash, began: u64) -> bool {
        self.bucket(key).load(Ordering::Acquire) > began
    }

    /// Makes every read of `key` begun until now stale.
    pub(crate) fn mark(&self, key: &impl Hash) {
        let now = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
        self.bucket(key).fetch_max(now, Ordering::AcqRel);
    }

    /// Makes every read begun until now stale.
    pub(crate) fn mark_all(&self) {
        let now = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
        for bucket in &self.buckets {
            bucket.fetch_max(now, Ordering::AcqRel);
        }
    }

    /// `key`'s value from `cache`, read by `read` when missing, or when a
    /// change (marked on `scope`) overtook the read that put it there.
    /// With `recent`, a value found current is also kept in this thread's
    /// table until the clock moves (a cache whose values expire by age
    /// passes none).
    pub(crate) async fn fresh<K, Q, V, E, F, Fut>(
        &self,
        cache: &Cache<K, Read<V>>,
        recent: Option<&'static RecentTable<K, V>>,
        key: &Q,
        scope: &impl Hash,
        read: F,
    ) -> Result<V, Arc<E>>
    where
        K: Hash + Eq + Borrow<Q> + Send + Sync + 'static,
        Q: Hash + Eq + Equivalent<K> + ToOwned<Owned = K> + ?Sized,
        V: Clone + Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let clock = self.now();
        if let Some(recent) = recent
            && let Some(value) = recent.with_borrow(|table| table.get(self.id, clock, key))
        {
            return Ok(value);
        }
        // Boxed: the cache's and the read's futures are kilobytes, and
        // every request's future would be as large as they are, and be
        // copied whole, even when this thread's table answers.
        Box::pin(async move {
            // Most requests find their value kept and checked: looked up by
            // reference, that takes no owned key (nor the cache's Arc of one).
            if let Some(found) = cache.get(key).await
                && found.checked.load(Ordering::Acquire)
            {
                // A value a drop overtook is still answered until the drop
                // removes it from the cache, but not kept in front of it.
                if let Some(recent) = recent
                    && !self.stale(scope, found.began)
                {
                    recent.with_borrow_mut(|table| {
                        table.put(self.id, clock, key.to_owned(), found.value.clone())
                    });
                }
                return Ok(found.value);
            }
            for _ in 0..READ_TRIES {
                let began = self.now();
                let found = cache
                    .try_get_with(key.to_owned(), async {
                        Ok(Read {
                            began,
                            checked: Arc::default(),
                            value: read().await?,
                        })
                    })
                    .await?;
                if found.checked.load(Ordering::Acquire) {
                    return Ok(found.value);
                }
                if !self.stale(scope, found.began) {
                    found.checked.store(true, Ordering::Release);
                    return Ok(found.value);
                }
                cache.invalidate(key).await;
            }
            Ok(read().await?)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_makes_reads_begun_before_it_stale() {
        let epochs = Epochs::new();
        let began = epochs.now();
        assert!(!epochs.stale(&"a.example", began));
        epochs.mark(&"a.example");
        assert!(epochs.stale(&"a.example", began));
        assert!(!epochs.stale(&"a.example", epochs.now()));
        let began = epochs.now();
        epochs.mark_all();
        assert!(epochs.stale(&"anything", began));
    }

    #[tokio::test]
    async fn a_value_read_before_a_drop_is_read_again() {
        let epochs = Epochs::new();
        let cache: Cache<&str, Read<u32>> = Cache::new(10);
        let reads = AtomicU64::new(0);
        let read = || async { Ok::<_, ()>(reads.fetch_add(1, Ordering::AcqRel) as u32) };
        assert_eq!(epochs.fresh(&cache, None, &"k", &"k", read).await, Ok(0));
        assert_eq!(epochs.fresh(&cache, None, &"k", &"k", read).await, Ok(0));
        epochs.mark(&"k");
        cache.invalidate(&"k").await;
        assert_eq!(epochs.fresh(&cache, None, &"k", &"k", read).await, Ok(1));
        assert_eq!(epochs.fresh(&cache, None, &"k", &"k", read).await, Ok(1));
    }

    thread_local! {
        static RECENT: RefCell<Recent<String, u32>> = RefCell::default();
    }

    #[tokio::test]
    async fn a_value_kept_in_front_of_the_cache_goes_with_the_next_drop() {
        let epochs = Epochs::new();
        let cache: Cache<String, Read<u32>> = Cache::new(10);
        let reads = AtomicU64::new(0);
        let read = || async { Ok::<_, ()>(reads.fetch_add(1, Ordering::AcqRel) as u32) };
        let fresh = || epochs.fresh(&cache, Some(&RECENT), "k", &"k", read);
        assert_eq!(fresh().await, Ok(0));
        assert_eq!(fresh().await, Ok(0));
        cache.invalidate("k").await;
        assert_eq!(fresh().await, Ok(0), "answered from the thread's table");
        epochs.mark(&"k");
        assert_eq!(fresh().await, Ok(1), "the drop emptied the table");
        assert_eq!(fresh().await, Ok(1));
        // Between a drop's mark and its removal from the cache, the old
        // value is still found there, but not put in front of it.
        epochs.mark(&"k");
        assert_eq!(fresh().await, Ok(1));
        cache.invalidate("k").await;
        assert_eq!(fresh().await, Ok(2));
        assert_eq!(reads.load(Ordering::Acquire), 3);
    }

    #[tokio::test]
    async fn a_read_overtaken_while_it_ran_is_not_kept() {
        let epochs = Epochs::new();
        let cache: Cache<&str, Read<u32>> = Cache::new(10);
        let reads = AtomicU64::new(0);
        let overtaken = || async {
            let n = reads.fetch_add(1, Ordering::AcqRel);
            if n == 0 {
                epochs.mark(&"k");
            }
            Ok::<_, ()>(n as u32)
        };
        assert_eq!(
            epochs.fresh(&cache, None, &"k", &"k", overtaken).await,
            Ok(1)
        );
        assert_eq!(
            epochs.fresh(&cache, None, &"k", &"k", overtaken).await,
            Ok(1)
        );
    }

    #[tokio::test]
    async fn a_kept_value_outlives_drops_of_other_keys_in_its_bucket() {
        let epochs = Epochs::new();
        let cache: Cache<&str, Read<u32>> = Cache::new(10);
        let reads = AtomicU64::new(0);
        let read = || async { Ok::<_, ()>(reads.fetch_add(1, Ordering::AcqRel) as u32) };
        assert_eq!(epochs.fresh(&cache, None, &"k", &"k", read).await, Ok(0));
        epochs.mark_all();
        assert_eq!(
            epochs.fresh(&cache, None, &"k", &"k", read).await,
            Ok(0),
            "a drop not of k leaves k's checked value"
        );
        assert_eq!(reads.load(Ordering::Acquire), 1);
    }
}
