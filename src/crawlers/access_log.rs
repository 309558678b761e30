//! The access log (`access_log = "json"`): one JSON line per request, to
//! stdout beside the other logs or to `access_log_file`, which SIGHUP
//! reopens (after logrotate moved it). Lines are written by a task of their
//! own; when it falls behind, lines are dropped and counted rather than
//! slowing requests.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const WAITING_LINES: usize = 16_384;

/// One request, as its line tells it.
#[derive(Debug, Serialize)]
pub(crate) struct AccessLine {
    /// RFC 3339, UTC.
    pub(crate) time: String,
    pub(crate) client: IpAddr,
    pub(crate) method: String,
    pub(crate) host: Option<String>,
    pub(crate) path: String,
    pub(crate) status: u16,
    pub(crate) bytes: u64,
    pub(crate) duration_ms: f64,
    pub(crate) user_agent: Option<String>,
    /// The family the user agent names (`other` for none).
    pub(crate) crawler: &'static str,
    /// Whether the address is verified as that family's.
    pub(crate) verified: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct AccessLog {
    lines: mpsc::Sender<Vec<u8>>,
    metrics: Arc<Metrics>,
}

impl AccessLog {
    /// Starts the writer, to `file` or stdout. A file that cannot be opened
    /// is an error here, naming it.
    pub(crate) fn start(
        file: Option<PathBuf>,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) -> std::io::Result<(AccessLog, tokio::task::JoinHandle<()>)> {
        let out = Out::open(file)?;
        let (lines, waiting) = mpsc::channel(WAITING_LINES);
        let task = tokio::spawn(write(out, waiting, stop));
        Ok((AccessLog { lines, metrics }, task))
    }

    pub(crate) fn log(&self, line: &AccessLine) {
        let mut text = serde_json::to_vec(line).expect("a line serializes");
        text.push(b'\n');
        if self.lines.try_send(text).is_err() {
            self.metrics.access_log_line_dropped();
        }
    }
}

enum Out {
    Stdout,
    File {
        path: PathBuf,
        file: std::io::BufWriter<std::fs::File>,
    },
}

impl Out {
    fn open(path: Option<PathBuf>) -> std::io::Result<Out> {
        Ok(match path {
            None => Out::Stdout,
            Some(path) => {
                let file = open_append(&path)?;
                Out::File { path, file }
            }
        })
    }

    fn write(&mut self, lines: &[u8]) {
        let written = match self {
            // Whole lines under stdout's lock: never mixed into another
            // log line.
            Out::Stdout => std::io::stdout().lock().write_all(lines),
            Out::File { file, .. } => file.write_all(lines),
        };
        if let Err(error) = written {
            tracing::warn!(%error, "writing the access log failed");
        }
    }

    fn flush(&mut self) {
        let flushed = match self {
            Out::Stdout => std::io::stdout().lock().flush(),
            Out::File { file, .. } => file.flush(),
        };
        if let Err(error) = flushed {
            tracing::warn!(%error, "writing the access log failed");
        }
    }

    /// Reopens the file by its name, where logrotate left a new one.
    fn reopen(&mut self) {
        if let Out::File { path, file } = self {
            let _ = file.flush();
            match open_append(path) {
                Ok(reopened) => *file = reopened,
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "reopening the access log failed");
                }
            }
        }
    }
}

fn open_append(path: &std::path::Path) -> std::io::Result<std::io::BufWriter<std::fs::File>> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|file| std::io::BufWriter::with_capacity(64 * 1024, file))
        .map_err(|error| {
            std::io::Error::new(
                error.kind(),
                format!("access_log_file {}: {error}", path.display()),
            )
        })
}

async fn write(mut out: Out, mut waiting: mpsc::Receiver<Vec<u8>>, stop: CancellationToken) {
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(hangups) => Some(hangups),
        Err(error) => {
            tracing::warn!(%error, "no SIGHUP handler: the access log is not reopened");
            None
        }
    };
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            received = waiting.recv_many(&mut batch, 256) => {
                if received == 0 {
                    break;
                }
                for line in batch.drain(..) {
                    out.write(&line);
                }
                if waiting.is_empty() {
                    out.flush();
                }
            }
            Some(()) = async { match hangups.as_mut() { Some(h) => h.recv().await, None => None } } => {
                out.reopen();
            }
            () = stop.cancelled() => break,
        }
    }
    while let Ok(line) = waiting.try_recv() {
        out.write(&line);
    }
    out.flush();
}
