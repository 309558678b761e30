//! A fake search-engine endpoint on loopback: it records every request and
//! answers from a script (then with a default), like an IndexNow API or a
//! sitemap ping URL would.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::net::TcpListener;

/// One answer: a status, and a `Retry-After` if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reply {
    pub status: u16,
    pub retry_after: Option<&'static str>,
}

pub(crate) const OK: Reply = Reply::status(200);

impl Reply {
    pub(crate) const fn status(status: u16) -> Reply {
        Reply {
            status,
            retry_after: None,
        }
    }
}

/// A request as received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub method: Method,
    pub uri: Uri,
    pub content_type: String,
    pub body: Bytes,
    pub at: Instant,
    /// What it was answered.
    pub status: u16,
}

/// An IndexNow POST body.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexNowBody {
    pub host: String,
    pub key: String,
    #[serde(rename = "keyLocation")]
    pub key_location: Option<String>,
    #[serde(rename = "urlList")]
    pub url_list: Vec<String>,
}

impl Received {
    pub(crate) fn indexnow(&self) -> IndexNowBody {
        serde_json::from_slice(&self.body).expect("an IndexNow JSON body")
    }
}

#[derive(Debug, Default)]
struct Script {
    replies: VecDeque<Reply>,
    default: Option<Reply>,
    received: Vec<Received>,
    /// How long each answer takes.
    hold: Duration,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    /// Listens on a random loopback port; answers 200 until scripted.
    pub(crate) async fn start() -> Receiver {
        let script = Arc::new(Mutex::new(Script::default()));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("bound address");
        let app = axum::Router::new()
            .fallback(record)
            .with_state(script.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { addr, script }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Answers the next requests with `replies`, in order.
    pub(crate) fn script(&self, replies: &[Reply]) {
        self.lock().replies.extend(replies.iter().copied());
    }

    /// Answers with `reply` once the script is used up.
    pub(crate) fn by_default(&self, reply: Reply) {
        self.lock().default = Some(reply);
    }

    /// Takes `hold` to answer each request from now on.
    pub(crate) fn hold_answers(&self, hold: Duration) {
        self.lock().hold = hold;
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// Waits (10 s at most) until `n` requests have come, and returns them.
    pub(crate) async fn until(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let received = self.received();
            if received.len() >= n {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "{n} requests expected within 10 s, {} came",
                received.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The URLs of every IndexNow POST answered with `status`, in order.
    pub(crate) fn urls_answered(&self, status: &[u16]) -> Vec<String> {
        self.received()
            .iter()
            .filter(|r| status.contains(&r.status))
            .flat_map(|r| r.indexnow().url_list)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().expect("receiver lock")
    }
}

async fn record(
    State(script): State<Arc<Mutex<Script>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (reply, hold) = answer(&script, method, uri, &headers, body);
    tokio::time::sleep(hold).await;
    let status = StatusCode::from_u16(reply.status).expect("a status");
    let mut response = (status, "scripted answer").into_response();
    if let Some(wait) = reply.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, wait.parse().expect("a header value"));
    }
    response
}

/// Records the request and picks its answer.
fn answer(
    script: &Mutex<Script>,
    method: Method,
    uri: Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> (Reply, Duration) {
    let mut script = script.lock().expect("receiver lock");
    let reply = script.replies.pop_front().or(script.default).unwrap_or(OK);
    script.received.push(Received {
        method,
        uri,
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        body,
        at: Instant::now(),
        status: reply.status,
    });
    (reply, script.hold)
}
