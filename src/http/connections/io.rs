//! A client socket that notices when its peer stops taking part.
//!
//! Two things hyper cannot see from above the socket are decided here, where
//! every byte passes:
//!
//! - **Write stall.** A client that accepts no bytes for the stall timeout
//!   (its receive window stays shut) gets an error on the next write, which
//!   ends the connection and frees what its response held. Slow but moving
//!   readers are never cut: the clock restarts on every byte accepted.
//! - **Idle keep-alive.** With no request in flight and no byte either way
//!   for the idle timeout, reading ends as if the client had closed, which
//!   hyper takes as a clean end of the connection.
//! - **Slow headers.** A request's head must arrive within the header
//!   timeout of the connection starting to wait for it (its opening, or the
//!   end of the response before), however its bytes trickle in.
//!
//! Bytes passing and responses ending only mark the connection active. The
//! time is read where it is needed: when the connection waits to read with
//! nothing in flight (the idle and header clocks), and when a write is
//! blocked. So a `304` reads the clock once, not at each of its reads and
//! writes. Each clock keeps one timer that is set again only when it fires
//! early: setting a timer on every request cost a `304` a seventh of its
//! rate.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Why a connection ended, as logged and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum CloseReason {
    /// The client closed it, or asked for `Connection: close`.
    Client = 0,
    /// Its request headers did not arrive within `header_read_timeout_ms`.
    HeaderTimeout,
    /// Nothing was asked of it for `keep_alive_timeout_ms`.
    Idle,
    /// Its client accepted no bytes for `write_stall_timeout_ms`.
    WriteStall,
    /// Over `max_connections`: answered once (health, or `503`), then closed.
    OverCapacity,
    /// Over every limit: closed as soon as it was accepted.
    Refused,
    /// The service was shutting down.
    Shutdown,
    /// A request hyper could not parse.
    BadRequest,
    /// The socket failed (reset by the peer, broken pipe).
    Error,
}

impl CloseReason {
    const ALL: [CloseReason; 9] = [
        CloseReason::Client,
        CloseReason::HeaderTimeout,
        CloseReason::Idle,
        CloseReason::WriteStall,
        CloseReason::OverCapacity,
        CloseReason::Refused,
        CloseReason::Shutdown,
        CloseReason::BadRequest,
        CloseReason::Error,
    ];

    /// The metric label and log field.
    pub(super) fn label(self) -> &'static str {
        match self {
            CloseReason::Client => "client",
            CloseReason::HeaderTimeout => "header_timeout",
            CloseReason::Idle => "idle",
            CloseReason::WriteStall => "write_stall",
            CloseReason::OverCapacity => "over_capacity",
            CloseReason::Refused => "refused",
            CloseReason::Shutdown => "shutdown",
            CloseReason::BadRequest => "bad_request",
            CloseReason::Error => "error",
        }
    }

    fn from_u8(value: u8) -> Option<CloseReason> {
        CloseReason::ALL.into_iter().find(|r| *r as u8 == value)
    }
}

/// What a connection's socket and its requests share.
#[derive(Debug)]
pub(super) struct ConnectionState {
    /// Requests whose response has not been handed over whole yet.
    in_flight: AtomicUsize,
    /// Responses handed over whole so far: each ends a request, and the
    /// connection begins waiting for the head of the next.
    responses_ended: AtomicU64,
    /// Set by whichever timeout ends the connection; 255 when none did.
    reason: AtomicU8,
}

const NO_REASON: u8 = u8::MAX;

impl ConnectionState {
    pub(super) fn new() -> Arc<ConnectionState> {
        Arc::new(ConnectionState {
            in_flight: AtomicUsize::new(0),
            responses_ended: AtomicU64::new(0),
            reason: AtomicU8::new(NO_REASON),
        })
    }

    /// Marks a request begun; the returned guard marks its response done
    /// when dropped (with the response body).
    pub(super) fn begin_request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// The reason a timeout recorded, if one ended the connection.
    pub(super) fn timed_out(&self) -> Option<CloseReason> {
        CloseReason::from_u8(self.reason.load(Ordering::Acquire))
    }

    fn record(&self, reason: CloseReason) {
        let _ = self.reason.compare_exchange(
            NO_REASON,
            reason as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

/// Held while a request is being answered.
#[derive(Debug)]
pub(super) struct InFlight(Arc<ConnectionState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.responses_ended.fetch_add(1, Ordering::AcqRel);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long a connection's client may take: to accept bytes of a response
/// (`write_stall`), to ask anything (`keep_alive`), and to send a request's
/// head (`header_read`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Clocks {
    pub(super) write_stall: Duration,
    pub(super) keep_alive: Duration,
    pub(super) header_read: Duration,
}

/// A TCP stream with the stall, idle and header clocks.
pub(super) struct GuardedStream {
    stream: TcpStream,
    state: Arc<ConnectionState>,
    write_stall: Duration,
    keep_alive: Duration,
    header_read: Duration,
    /// Whether a byte was read or written since the clocks were last
    /// brought up to date.
    active: bool,
    /// The responses ended when the clocks were last brought up to date.
    responses_seen: u64,
    /// When the connection was last seen active.
    last_activity: Instant,
    /// When it began waiting for the head of its next request: its opening,
    /// or the end of the response before.
    waiting_for_head_since: Instant,
    /// When writing last became blocked, while it still is.
    blocked_since: Option<Instant>,
    stall_timer: Option<Pin<Box<Sleep>>>,
    read_timer: Option<Pin<Box<Sleep>>>,
}

impl GuardedStream {
    pub(super) fn new(
        stream: TcpStream,
        state: Arc<ConnectionState>,
        clocks: Clocks,
    ) -> GuardedStream {
        let opened = Instant::now();
        GuardedStream {
            stream,
            state,
            write_stall: clocks.write_stall,
            keep_alive: clocks.keep_alive,
            header_read: clocks.header_read,
            active: false,
            responses_seen: 0,
            last_activity: opened,
            waiting_for_head_since: opened,
            blocked_since: None,
            stall_timer: None,
            read_timer: None,
        }
    }

    /// Called when a write could not proceed: an error once the client has
    /// accepted nothing for the stall timeout, else a wake-up at that time.
    fn check_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let now = Instant::now();
        let since = *self.blocked_since.get_or_insert(now);
        let deadline = since + self.write_stall;
        if expired(&mut self.stall_timer, deadline, now, cx) {
            self.state.record(CloseReason::WriteStall);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client accepted no bytes for {} ms",
                    self.write_stall.as_millis()
                ),
            )));
        }
        Poll::Pending
    }

    fn wrote(&mut self, written: &io::Result<usize>) {
        if matches!(written, Ok(n) if *n > 0) {
            self.blocked_since = None;
            self.active = true;
        }
    }

    /// Now, with the idle and header clocks moved up to it if the
    /// connection was active since they were last looked at: the time bytes
    /// passed or a response ended is taken as the next time the connection
    /// waits to read, which on a connection with nothing in flight follows
    /// at once.
    fn catch_up(&mut self) -> Instant {
        let now = Instant::now();
        let ended = self.state.responses_ended.load(Ordering::Acquire);
        if ended != self.responses_seen {
            self.responses_seen = ended;
            self.waiting_for_head_since = now;
            self.active = true;
        }
        if self.active {
            self.active = false;
            self.last_activity = now;
        }
        now
    }
}

/// Whether `deadline` has passed; if not, `timer` wakes the task by then.
/// A timer set for later is set again; one set for earlier is left to fire
/// and be looked at then, so a deadline that moves on with every request
/// does not reset it every time.
fn expired(
    timer: &mut Option<Pin<Box<Sleep>>>,
    deadline: Instant,
    now: Instant,
    cx: &mut Context<'_>,
) -> bool {
    if now >= deadline {
        return true;
    }
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    if timer.deadline() > deadline || timer.deadline() <= now {
        timer.as_mut().reset(deadline);
    }
    // Registers the waker; a timer that fired early was set again above.
    let _ = timer.as_mut().poll(cx);
    false
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.active = true;
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                if this.state.is_idle() {
                    let now = this.catch_up();
                    let idle = this.last_activity + this.keep_alive;
                    let head = this.waiting_for_head_since + this.header_read;
                    if expired(&mut this.read_timer, idle.min(head), now, cx) {
                        // Read as the end of the stream: hyper closes an idle
                        // connection at end of stream without complaint.
                        let reason = if head <= idle {
                            CloseReason::HeaderTimeout
                        } else {
                            CloseReason::Idle
                        };
                        this.state.record(reason);
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.stream).poll_write(cx, buf) {
            Poll::Ready(written) => {
                this.wrote(&written);
                Poll::Ready(written)
            }
            Poll::Pending => this.check_stall(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.stream).poll_write_vectored(cx, bufs) {
            Poll::Ready(written) => {
                this.wrote(&written);
                Poll::Ready(written)
            }
            Poll::Pending => this.check_stall(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        // Lets hyper queue body chunks by reference instead of copying them.
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.stream).poll_shutdown(cx) {
            Poll::Ready(result) => Poll::Ready(result),
            Poll::Pending => {
                ready!(this.check_stall(cx))?;
                Poll::Pending
            }
        }
    }
}
