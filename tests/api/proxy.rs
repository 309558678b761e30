//! Behind a real reverse proxy: Debian's nginx on loopback, running the
//! sample `config/nginx.conf` with only its two addresses rewritten.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sqlx::PgPool;
use tempfile::TempDir;

use crate::helpers::{TestApp, gunzip, header};

const PUBLIC_BASE: &str = "http://www.example.com/sitemaps/";
const PUBLIC_HOST: &str = "www.example.com";

/// nginx as a child process; stopped when dropped.
pub(crate) struct Nginx {
    child: Child,
    port: u16,
    /// Holds the config and logs while nginx runs.
    prefix: TempDir,
    /// Whether it runs a master process and its worker.
    master: bool,
}

impl Nginx {
    async fn start(upstream_port: u16) -> Nginx {
        Nginx::run(|sample, port, _| {
            sample
                .replace(
                    "server sitemapd:8080;",
                    &format!("server 127.0.0.1:{upstream_port};"),
                )
                .replace("listen 8081;", &format!("listen 127.0.0.1:{port};"))
        })
        .await
    }

    /// Runs the sample `config/nginx.conf` as `rewrite` rewrites it, given
    /// the sample, the port nginx is to listen on and nginx's directory
    /// (where `files` are written first, by name).
    pub(crate) async fn run_sample(
        sample: &str,
        files: &[(&str, String)],
        rewrite: impl FnOnce(&str, u16, &Path) -> String,
    ) -> Nginx {
        Nginx::run_sample_as(sample, files, rewrite, false).await
    }

    /// [`Nginx::run_sample`] with a master process and its worker, which
    /// [`Nginx::reload`] can reload (a lone process answers garbage after a
    /// reload).
    pub(crate) async fn run_sample_reloadable(
        sample: &str,
        files: &[(&str, String)],
        rewrite: impl FnOnce(&str, u16, &Path) -> String,
    ) -> Nginx {
        Nginx::run_sample_as(sample, files, rewrite, true).await
    }

    async fn run_sample_as(
        sample: &str,
        files: &[(&str, String)],
        rewrite: impl FnOnce(&str, u16, &Path) -> String,
        master: bool,
    ) -> Nginx {
        let sample = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(sample))
            .expect("sample config");
        Nginx::launch(
            |port, dir| {
                for (name, text) in files {
                    std::fs::write(dir.join(name), text).expect("write a file nginx reads");
                }
                let config = rewrite(&sample, port, dir);
                assert_ne!(config, sample, "the sample's addresses were rewritten");
                config
            },
            master,
        )
        .await
    }

    /// nginx with a whole configuration of the test's own, which
    /// `config_of` writes given the port and nginx's directory (where
    /// `files` are written first, by name).
    pub(crate) async fn launch_config(
        files: &[(&str, Vec<u8>)],
        config_of: impl FnOnce(u16, &Path) -> String,
    ) -> Nginx {
        Nginx::launch(
            |port, dir| {
                for (name, bytes) in files {
                    std::fs::write(dir.join(name), bytes).expect("write a file nginx reads");
                }
                config_of(port, dir)
            },
            false,
        )
        .await
    }

    /// nginx's directory: its configuration, files and logs.
    pub(crate) fn prefix(&self) -> &Path {
        self.prefix.path()
    }

    async fn run(rewrite: impl FnOnce(&str, u16, &Path) -> String) -> Nginx {
        Nginx::run_sample("config/nginx.conf", &[], rewrite).await
    }

    async fn launch(config_of: impl FnOnce(u16, &Path) -> String, master: bool) -> Nginx {
        let port = crate::helpers::free_port();
        let prefix = TempDir::new().expect("nginx prefix");
        let config = config_of(port, prefix.path());
        let config_path = prefix.path().join("nginx.conf");
        std::fs::write(&config_path, config).expect("write config");
        // One process, no workers, unless it is to reload: killing it on
        // drop leaves nothing behind (killing a master would orphan its
        // workers, so a master is asked to stop instead).
        let mut globals = format!(
            "daemon off; pid {dir}/nginx.pid; error_log {dir}/error.log;",
            dir = prefix.path().display()
        );
        if !master {
            globals.push_str(" master_process off;");
        } else if running_as_root() {
            // Workers as root too, to reach the test's private directory.
            globals.push_str(" user root;");
        }
        let child = Command::new("nginx")
            .arg("-p")
            .arg(prefix.path())
            .arg("-c")
            .arg(&config_path)
            .args(["-g", &globals])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx runs (Debian package nginx-light)");
        // Owned from here on, so it is stopped on every path, panics included.
        let nginx = Nginx {
            child,
            port,
            prefix,
            master,
        };
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return nginx;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let log =
            std::fs::read_to_string(nginx.prefix.path().join("error.log")).unwrap_or_default();
        panic!("nginx did not start listening on {port}: {log}");
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Writes `files` over those nginx reads, and has it read them again,
    /// as `nginx -s reload` does (a `SIGHUP`); for [`Nginx::run_sample_reloadable`].
    pub(crate) fn reload(&self, files: &[(&str, String)]) {
        assert!(self.master, "a lone nginx process cannot reload");
        for (name, text) in files {
            std::fs::write(self.prefix.path().join(name), text).expect("write a file nginx reads");
        }
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "nginx took the signal");
    }

    /// Fetches a public URL through nginx, as a crawler resolving the
    /// public host to this proxy would.
    async fn get(&self, public_url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let path = public_url
            .strip_prefix(&format!("http://{PUBLIC_HOST}"))
            .unwrap_or_else(|| panic!("{public_url} is not on the public host"));
        let mut request = crate::helpers::client()
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .header("host", PUBLIC_HOST);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("nginx answers")
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if self.master {
            // A fast shutdown: the master stops its workers, then exits.
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
        } else {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

#[sqlx::test]
async fn a_crawl_through_nginx_returns_exactly_the_table(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.base_url = PUBLIC_BASE.into();
        s.max_urls = 700;
    })
    .await;
    for (section, n) in [("", 1500), ("news", 300)] {
        sqlx::query("INSERT INTO sitemap_urls (section, loc) SELECT $1, $2 || 'item/' || g FROM generate_series(1, $3) g")
            .bind(section)
            .bind(format!("{PUBLIC_BASE}{}", if section.is_empty() { "" } else { "news/" }))
            .bind(n)
            .execute(&app.pool)
            .await
            .expect("seed");
        app.fold().await;
    }
    let nginx = Nginx::start(app.addr.port()).await;

    let index = nginx
        .get(&format!("{PUBLIC_BASE}sitemap_index.xml"), &[])
        .await;
    assert_eq!(index.status(), 200);
    let index = index.text().await.expect("index");
    let locs: Vec<String> = index
        .split("<loc>")
        .skip(1)
        .map(|rest| rest.split("</loc>").next().expect("closed").to_owned())
        .collect();
    assert_eq!(locs.len(), 4, "{index}");
    let mut served = Vec::new();
    for loc in &locs {
        assert!(
            loc.starts_with(PUBLIC_BASE),
            "absolute URL on the public base: {loc}"
        );
        let page = nginx.get(loc, &[]).await;
        assert_eq!(page.status(), 200, "{loc}");
        assert_eq!(header(&page, "content-type"), "application/gzip");
        assert!(page.headers().get("content-encoding").is_none(), "{loc}");
        let etag = header(&page, "etag").to_owned();
        let xml = String::from_utf8(gunzip(&page.bytes().await.expect("page"))).expect("UTF-8");
        crate::helpers::assert_valid(xml.as_bytes(), crate::helpers::Schema::Urlset);
        served.extend(
            xml.split("<loc>")
                .skip(1)
                .map(|rest| rest.split("</loc>").next().expect("closed").to_owned()),
        );
        let revalidated = nginx.get(loc, &[("if-none-match", &etag)]).await;
        assert_eq!(
            revalidated.status(),
            304,
            "conditional GET through nginx: {loc}"
        );
    }
    served.sort();
    assert_eq!(served, app.table_locs().await);

    let robots = nginx
        .get(&format!("http://{PUBLIC_HOST}/robots.txt"), &[])
        .await;
    assert_eq!(
        robots.text().await.expect("robots"),
        format!("Sitemap: {PUBLIC_BASE}sitemap_index.xml\n")
    );
}
