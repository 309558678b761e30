//! The servers a database URL names: one, or several in libpq's form,
//! `postgres://h1:5432,h2:5433/sitemapd?target_session_attrs=read-write`,
//! of which connections go to the first that fits (sqlx takes one host).
//!
//! With several, a watcher asks the server the pool connects to, every
//! second, whether it still fits; when it does not answer, or is a standby
//! now, the watcher finds the one that fits and moves the pool's new
//! connections there. So after the primary fails and a standby is promoted,
//! the service follows it without a restart; meanwhile requests that need
//! the database get `503` with `Retry-After`.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, PgPool};

use super::Error;

/// How often the watcher asks the pool's server.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long the watcher waits for the pool's server before it looks for
/// another that fits.
const QUICK_LOOK: Duration = Duration::from_millis(500);

/// Which server a connection wants (libpq's `target_session_attrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionAttrs {
    /// Whichever answers first.
    Any,
    /// One that takes writes: the primary.
    ReadWrite,
    /// A standby if one answers, else any.
    PreferStandby,
}

/// The servers of one URL, in the order it names them.
#[derive(Debug, Clone)]
pub(crate) struct Servers {
    candidates: Vec<PgConnectOptions>,
    wants: SessionAttrs,
    /// The pools on them, which move together: the service's and those of
    /// its background work.
    pools: Arc<Mutex<Vec<PgPool>>>,
}

impl Servers {
    /// Parses `url`; a bad one is refused naming what is wrong.
    pub(crate) fn parse(url: &str) -> Result<Servers, Error> {
        let bad = |why: String| Error::Configuration(format!("database URL: {why}"));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("no scheme (postgres://…)".into()))?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        let mut wants = SessionAttrs::Any;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => {
                    wants = match value {
                        "any" => SessionAttrs::Any,
                        "read-write" | "primary" => SessionAttrs::ReadWrite,
                        "prefer-standby" => SessionAttrs::PreferStandby,
                        other => {
                            return Err(bad(format!(
                                "target_session_attrs={other}: expected any, read-write, primary or prefer-standby"
                            )));
                        }
                    }
                }
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let candidates = hosts
            .split(',')
            .map(|host| {
                if host.is_empty() {
                    return Err(bad("an empty host in the list".into()));
                }
                let single = format!("{scheme}://{userinfo}{host}{path}{query}");
                PgConnectOptions::from_str(&single)
                    .map_err(|error| bad(format!("host {host}: {error}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Servers {
            candidates,
            wants,
            pools: Arc::default(),
        })
    }

    /// The same servers, each connected to with `options` applied.
    pub(crate) fn map(self, options: impl Fn(PgConnectOptions) -> PgConnectOptions) -> Servers {
        Servers {
            candidates: self.candidates.into_iter().map(options).collect(),
            ..self
        }
    }

    /// Whether the URL names more than one server.
    pub(crate) fn several(&self) -> bool {
        self.candidates.len() > 1
    }

    /// The first server named: the one to connect to when there is one.
    pub(crate) fn first(&self) -> PgConnectOptions {
        self.candidates[0].clone()
    }

    /// The first server that answers within `timeout` and fits; an error
    /// naming each one tried and why it did not do.
    pub(crate) async fn find(&self, timeout: Duration) -> Result<PgConnectOptions, Error> {
        let mut tried = Vec::new();
        let mut answering = None;
        for options in &self.candidates {
            let server = name(options);
            match tokio::time::timeout(timeout, in_recovery(options)).await {
                Err(_) => tried.push(format!(
                    "{server}: no answer within {} ms",
                    timeout.as_millis()
                )),
                Ok(Err(error)) => tried.push(format!("{server}: {error}")),
                Ok(Ok(standby)) => {
                    if self.fits(standby) {
                        return Ok(options.clone());
                    }
                    tried.push(format!(
                        "{server}: a {}",
                        if standby { "standby" } else { "primary" }
                    ));
                    answering.get_or_insert_with(|| options.clone());
                }
            }
        }
        match (self.wants, answering) {
            (SessionAttrs::PreferStandby, Some(any)) => Ok(any),
            _ => Err(Error::Configuration(format!(
                "no server of the database URL fits target_session_attrs={}: {}",
                match self.wants {
                    SessionAttrs::Any => "any",
                    SessionAttrs::ReadWrite => "read-write",
                    SessionAttrs::PreferStandby => "prefer-standby",
                },
                tried.join("; ")
            ))),
        }
    }

    fn fits(&self, standby: bool) -> bool {
        match self.wants {
            SessionAttrs::Any => true,
            SessionAttrs::ReadWrite => !standby,
            SessionAttrs::PreferStandby => standby,
        }
    }

    /// Has `pool` move with the others when the server that fits moves.
    pub(crate) fn moves(&self, pool: &PgPool) {
        self.pools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(pool.clone());
    }

    fn pools(&self) -> Vec<PgPool> {
        self.pools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Keeps the pools' new connections on a server that fits, until
    /// aborted: each look, at the first pool's server, bounded by
    /// `timeout`.
    pub(crate) async fn follow(self, timeout: Duration) {
        let Some(pool) = self.pools().first().cloned() else {
            return;
        };
        loop {
            tokio::time::sleep(CHECK_INTERVAL).await;
            let current = pool.connect_options();
            // Short: a dead server's pool retries connecting for its whole
            // acquire timeout, and a wrong guess costs only a look at
            // each server (the pools move only to another that fits).
            let still_fits = tokio::time::timeout(timeout.min(QUICK_LOOK), async {
                sqlx::query_scalar::<_, bool>("SELECT pg_is_in_recovery()")
                    .fetch_one(&pool)
                    .await
            })
            .await;
            let why = match still_fits {
                Ok(Ok(standby)) if self.fits(standby) => continue,
                Ok(Ok(_)) => "it is a standby now".to_owned(),
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!(
                    "no answer within {} ms",
                    timeout.min(QUICK_LOOK).as_millis()
                ),
            };
            match self.find(timeout).await {
                Ok(found) if name(&found) != name(&current) => {
                    tracing::warn!(
                        from = %name(&current),
                        to = %name(&found),
                        %why,
                        "the database moved: new connections go to the server that fits"
                    );
                    for pool in self.pools() {
                        pool.set_connect_options(found.clone());
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    server = %name(&current),
                    %why,
                    %error,
                    "the database does not answer, and no other server of its URL fits yet"
                ),
            }
        }
    }
}

/// How logs name a server: host and port.
pub(crate) fn name(options: &PgConnectOptions) -> String {
    format!("{}:{}", options.get_host(), options.get_port())
}

/// Whether the server `options` reaches is in recovery (a standby).
async fn in_recovery(options: &PgConnectOptions) -> Result<bool, sqlx::Error> {
    let mut conn: PgConnection = options.connect().await?;
    let standby = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut conn)
        .await?;
    let _ = sqlx::Connection::close(conn).await;
    Ok(standby)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_of_several_hosts_names_each_with_the_rest_of_the_url() {
        let servers = Servers::parse(
            "postgres://app:secret@h1:5432,h2:5433/sitemapd?target_session_attrs=read-write&sslmode=disable",
        )
        .expect("parses");
        assert!(servers.several());
        assert_eq!(servers.wants, SessionAttrs::ReadWrite);
        let names: Vec<String> = servers.candidates.iter().map(name).collect();
        assert_eq!(names, ["h1:5432", "h2:5433"]);
        for options in &servers.candidates {
            assert_eq!(options.get_database(), Some("sitemapd"));
            assert_eq!(options.get_username(), "app");
        }
    }

    #[test]
    fn a_url_of_one_host_is_one_server() {
        let servers =
            Servers::parse("postgres://postgres@127.0.0.1:5432/sitemapd").expect("parses");
        assert!(!servers.several());
        assert_eq!(servers.wants, SessionAttrs::Any);
        assert_eq!(name(&servers.first()), "127.0.0.1:5432");
    }

    #[test]
    fn bad_urls_are_refused_naming_what_is_wrong() {
        for (url, expected) in [
            ("h1:5432/sitemapd", "no scheme"),
            ("postgres://h1,,h2/sitemapd", "an empty host"),
            (
                "postgres://h1,h2/db?target_session_attrs=standby-ish",
                "target_session_attrs=standby-ish",
            ),
        ] {
            let error = Servers::parse(url).expect_err(url).to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }
}
