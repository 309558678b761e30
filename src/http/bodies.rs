//! Response bodies in flight: what each one holds, counted against one
//! memory budget, and the streams that hand them out as the client reads.
//!
//! A response holds memory until its client has taken it, and a client
//! decides how fast that is. So every body is bounded twice: per response,
//! a page is handed out from the chunks the cache already holds (an
//! uncompressed `.xml` is inflated from them a piece at a time as the
//! connection asks for more, never rendered ahead of the client), and
//! across responses, the bytes they hold together stay within
//! `response_memory_bytes`. A page that many responses hold at once counts
//! once. A request that would go past the budget is answered `503` with
//! `Retry-After`; the write-stall timeout sees to it that clients who stop
//! reading give their share back.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use flate2::bufread::GzDecoder;
use futures_util::Stream;

use super::HttpError;
use crate::metrics::Metrics;
use crate::pages::cache::{Chunks, total_len};

/// What an uncompressed stream holds besides its page: the inflater's
/// window and state, the piece it hands over, and what the connection
/// buffers of it (64 KiB at most, see `connections`).
pub(crate) const INFLATE_HOLD_BYTES: u64 = 192 * 1024;

/// How much an uncompressed stream inflates at a time.
const INFLATE_PIECE_BYTES: usize = 32 * 1024;

/// The budget every response body in flight is counted against.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    limit: u64,
    held: Mutex<Held>,
    metrics: Arc<Metrics>,
}

#[derive(Debug, Default)]
struct Held {
    bytes: u64,
    /// Shared bodies by address: how many responses hold each, and its size.
    shared: HashMap<usize, (usize, u64)>,
}

/// A response's share of the budget, given back when dropped with its body.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<BodyBudget>,
    own: u64,
    shared: Option<usize>,
}

impl BodyBudget {
    pub(crate) fn new(limit: u64, metrics: Arc<Metrics>) -> Arc<BodyBudget> {
        Arc::new(BodyBudget {
            limit,
            held: Mutex::default(),
            metrics,
        })
    }

    /// Counts `own` bytes that this response alone holds, and `shared`,
    /// a cached page it hands out, once however many responses hold it.
    /// Refused when that would go past the budget.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        own: u64,
        shared: Option<&Chunks>,
    ) -> Result<Reservation, HttpError> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let key = shared.map(|chunks| Arc::as_ptr(chunks).cast::<()>() as usize);
        let shared_new = match (key, shared) {
            (Some(key), Some(chunks)) if !held.shared.contains_key(&key) => {
                total_len(chunks) as u64
            }
            _ => 0,
        };
        if held.bytes + own + shared_new > self.limit {
            drop(held);
            self.metrics.response_refused("response_memory");
            return Err(HttpError::MemoryBudget);
        }
        held.bytes += own + shared_new;
        if let Some(key) = key {
            held.shared.entry(key).or_insert((0, shared_new)).0 += 1;
        }
        self.metrics.response_memory(held.bytes);
        Ok(Reservation {
            budget: self.clone(),
            own,
            shared: key,
        })
    }

    /// Bytes held now.
    #[cfg(test)]
    fn held(&self) -> u64 {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut freed = self.own;
        if let Some(key) = self.shared
            && let Some((holders, bytes)) = held.shared.get_mut(&key)
        {
            *holders -= 1;
            if *holders == 0 {
                freed += *bytes;
                held.shared.remove(&key);
            }
        }
        held.bytes -= freed;
        self.budget.metrics.response_memory(held.bytes);
    }
}

/// A cached page handed out chunk by chunk, by reference.
pub(crate) struct HeldChunks {
    chunks: Chunks,
    next: usize,
    _held: Reservation,
}

impl HeldChunks {
    pub(crate) fn new(chunks: Chunks, held: Reservation) -> HeldChunks {
        HeldChunks {
            chunks,
            next: 0,
            _held: held,
        }
    }
}

impl Stream for HeldChunks {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let chunk = self.chunks.get(self.next).cloned();
        self.next += 1;
        Poll::Ready(chunk.map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.chunks.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

/// A cached gzip page inflated a piece at a time, as the connection asks
/// for the next one.
pub(crate) struct Inflated {
    decoder: GzDecoder<ChunkReader>,
    done: bool,
    _held: Reservation,
    /// Counts the bytes handed out, under the route's label, at the end.
    counted: Option<(Arc<Metrics>, &'static str)>,
    handed_out: usize,
}

impl Inflated {
    pub(crate) fn new(gzip: Chunks, held: Reservation) -> Inflated {
        Inflated {
            decoder: GzDecoder::new(ChunkReader {
                chunks: gzip,
                index: 0,
                offset: 0,
            }),
            done: false,
            _held: held,
            counted: None,
            handed_out: 0,
        }
    }

    /// Counts the bytes handed out in `metrics` under `route` once all are.
    pub(crate) fn counted(mut self, metrics: Arc<Metrics>, route: &'static str) -> Inflated {
        self.counted = Some((metrics, route));
        self
    }
}

impl Stream for Inflated {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut piece = BytesMut::zeroed(INFLATE_PIECE_BYTES);
        match self.decoder.read(&mut piece) {
            Ok(0) => {
                self.done = true;
                if let Some((metrics, route)) = &self.counted {
                    metrics.body_bytes(route, self.handed_out);
                }
                Poll::Ready(None)
            }
            Ok(n) => {
                self.handed_out += n;
                piece.truncate(n);
                Poll::Ready(Some(Ok(piece.freeze())))
            }
            Err(error) => {
                self.done = true;
                Poll::Ready(Some(Err(error)))
            }
        }
    }
}

/// Reads a page's chunks in order without copying them.
struct ChunkReader {
    chunks: Chunks,
    index: usize,
    offset: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ChunkReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self
            .chunks
            .get(self.index)
            .is_some_and(|chunk| self.offset >= chunk.len())
        {
            self.index += 1;
            self.offset = 0;
        }
        Ok(self
            .chunks
            .get(self.index)
            .map_or(&[][..], |chunk| &chunk[self.offset..]))
    }

    fn consume(&mut self, amount: usize) {
        self.offset += amount;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use futures_util::StreamExt;

    use super::*;

    fn budget(limit: u64) -> Arc<BodyBudget> {
        BodyBudget::new(limit, Arc::new(Metrics::default()))
    }

    fn page(sizes: &[usize]) -> Chunks {
        sizes
            .iter()
            .map(|&n| Bytes::from(vec![b'x'; n]))
            .collect::<Vec<_>>()
            .into()
    }

    #[test]
    fn a_shared_page_counts_once_and_is_given_back_with_its_last_holder() {
        let budget = budget(1000);
        let shared = page(&[300, 300]);
        let first = budget.reserve(10, Some(&shared)).expect("fits");
        let second = budget.reserve(10, Some(&shared)).expect("shares the page");
        assert_eq!(budget.held(), 620);
        let other = page(&[500]);
        assert!(matches!(
            budget.reserve(0, Some(&other)),
            Err(HttpError::MemoryBudget)
        ));
        drop(first);
        assert_eq!(budget.held(), 610, "the page is still held by the second");
        drop(second);
        assert_eq!(budget.held(), 0);
        let third = budget.reserve(0, Some(&other)).expect("fits now");
        assert_eq!(budget.held(), 500);
        drop(third);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn an_inflated_page_is_the_gzip_pages_document_in_bounded_pieces() {
        let document: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("<url>{i}</url>").into_bytes())
            .collect();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&document).expect("compress");
        let gzip = encoder.finish().expect("finish");
        let chunks: Chunks = gzip
            .chunks(1000)
            .map(Bytes::copy_from_slice)
            .collect::<Vec<_>>()
            .into();
        let budget = budget(u64::MAX);
        let held = budget
            .reserve(INFLATE_HOLD_BYTES, Some(&chunks))
            .expect("fits");
        let pieces: Vec<Bytes> = Inflated::new(chunks, held)
            .map(|piece| piece.expect("inflates"))
            .collect()
            .await;
        assert!(pieces.iter().all(|p| p.len() <= INFLATE_PIECE_BYTES));
        assert_eq!(pieces.concat(), document);
        assert_eq!(budget.held(), 0, "given back when the stream is dropped");
    }
}
