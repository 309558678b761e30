//! The service's idea of now, for what depends on the time rather than on a
//! write: the news sitemap's 48-hour window.
//!
//! It is the system clock, moved by an offset that starts at zero. Moving it
//! lets tests roll the window without waiting two days; clones share one
//! offset, so the folder, the store and the test see the same time.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use time::{Duration, OffsetDateTime};

#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_nanos: Arc<AtomicI64>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    pub(crate) fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + Duration::nanoseconds(self.offset_nanos.load(Ordering::Acquire))
    }

    /// Moves now forward by `by` (backward when negative).
    pub fn advance(&self, by: Duration) {
        let nanos = i64::try_from(by.whole_nanoseconds()).unwrap_or(i64::MAX);
        self.offset_nanos.fetch_add(nanos, Ordering::AcqRel);
    }
}
