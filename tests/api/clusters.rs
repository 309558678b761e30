//! PostgreSQL clusters the tests start themselves, on free loopback ports:
//! a primary of their own (initdb), whose log they read, and hot standbys
//! of it (pg_basebackup -R). Each is stopped and removed when dropped.
//! Run as root, the server's commands run as the `postgres` user, which
//! PostgreSQL requires.

use std::path::{Path, PathBuf};
use std::process::Command;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::helpers::free_port;

pub(crate) struct Cluster {
    /// Holds the data directory, the socket and the log.
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    /// A new primary, started.
    pub(crate) fn primary() -> Cluster {
        let mut cluster = Cluster::new();
        server_command(
            "initdb",
            &[
                "-D",
                &cluster.data().display().to_string(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
            ],
        );
        cluster.first_start();
        cluster
    }

    /// A hot standby of `primary`, streaming from it, started.
    pub(crate) fn standby_of(primary: &Cluster) -> Cluster {
        let mut cluster = Cluster::new();
        server_command(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                "postgres",
                "-D",
                &cluster.data().display().to_string(),
                "-R",
                "-X",
                "stream",
                "--checkpoint=fast",
                "--no-sync",
            ],
        );
        cluster.first_start();
        cluster
    }

    fn new() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("sitemapd-cluster-")
            .tempdir()
            .expect("a directory for the cluster");
        hand_to_postgres(dir.path());
        Cluster {
            dir,
            port: free_port(),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Starts the new cluster, on another free port while the one picked
    /// was taken before the server could bind it.
    fn first_start(&mut self) {
        for _ in 0..5 {
            match self.try_start() {
                Ok(()) => return,
                Err(failure) if self.log().contains("could not bind") => {
                    eprintln!("port {} was taken, another: {failure}", self.port);
                    self.port = free_port();
                }
                Err(failure) => panic!("{failure}"),
            }
        }
        panic!("no free port for a cluster in five tries:\n{}", self.log());
    }

    /// Starts the server again on its port, as it was stopped.
    pub(crate) fn start(&self) {
        if let Err(failure) = self.try_start() {
            panic!("{failure}");
        }
    }

    /// Says why the server did not start, with its log.
    fn try_start(&self) -> Result<(), String> {
        let options = format!(
            "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off \
             -c full_page_writes=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let data = self.data().display().to_string();
        let log = self.log_file().display().to_string();
        let output = as_server_user(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-o", &options, "-w", "start"],
        )
        .output()
        .expect("pg_ctl runs");
        if output.status.success() {
            return Ok(());
        }
        Err(format!(
            "pg_ctl start on port {}: {}{}\nthe server's log:\n{}",
            self.port,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.log()
        ))
    }

    pub(crate) fn stop(&self) {
        server_command(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }

    /// Ends recovery: the standby becomes a primary.
    pub(crate) fn promote(&self) {
        server_command(
            "pg_ctl",
            &["-D", &self.data().display().to_string(), "-w", "promote"],
        );
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// A pool on `database`, created first when missing.
    pub(crate) async fn pool(&self, database: &str) -> PgPool {
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&self.url("postgres"))
            .await
            .expect("the cluster answers");
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                .bind(database)
                .fetch_one(&admin)
                .await
                .expect("databases");
        if !exists {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "CREATE DATABASE \"{database}\""
            )))
            .execute(&admin)
            .await
            .expect("create database");
        }
        admin.close().await;
        PgPoolOptions::new()
            .max_connections(10)
            .connect(&self.url(database))
            .await
            .expect("the database answers")
    }

    /// A pool on `database`, created when missing, with sitemapd's schema.
    pub(crate) async fn migrated(&self, database: &str) -> PgPool {
        let pool = self.pool(database).await;
        sitemapd::store::Store::from_pool(pool.clone())
            .migrate()
            .await
            .expect("migrated");
        pool
    }

    /// The server's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log_file()).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let _ = as_server_user("pg_ctl", &["-D", &data, "-m", "immediate", "stop"]).output();
    }
}

/// Where the server's commands are: the newest installed PostgreSQL's.
fn bin(command: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server packages (/usr/lib/postgresql)")
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort_by_key(|path| {
        path.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
    });
    versions
        .pop()
        .expect("initdb under /usr/lib/postgresql/*/bin")
        .join(command)
}

fn running_as_root() -> bool {
    static ROOT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ROOT.get_or_init(|| {
        let id = Command::new("id").arg("-u").output().expect("id -u");
        String::from_utf8_lossy(&id.stdout).trim() == "0"
    })
}

fn hand_to_postgres(path: &Path) {
    if running_as_root() {
        let status = Command::new("chown")
            .args(["postgres:postgres", &path.display().to_string()])
            .status()
            .expect("chown");
        assert!(status.success(), "chown {} to postgres", path.display());
    }
}

/// A server command, to run as `postgres` when the tests run as root.
fn as_server_user(command: &str, args: &[&str]) -> Command {
    let mut run = if running_as_root() {
        let mut run = Command::new("runuser");
        run.args(["-u", "postgres", "--"]).arg(bin(command));
        run
    } else {
        Command::new(bin(command))
    };
    run.args(args);
    run
}

/// Runs a server command, as [`as_server_user`] words it, and checks it.
fn server_command(command: &str, args: &[&str]) {
    let output = as_server_user(command, args)
        .output()
        .expect("the server's commands run");
    assert!(
        output.status.success(),
        "{command} {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
