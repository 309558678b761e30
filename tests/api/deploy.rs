//! The deployment files, checked as far as this machine can (no container
//! engine runs here): the compose file parses and wires what it says, the
//! Dockerfile builds the way CI builds, and its health check works.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sqlx::PgPool;

use crate::helpers::{TestApp, robots_command};

#[derive(Debug, Deserialize)]
struct Compose {
    services: BTreeMap<String, Service>,
}

#[derive(Debug, Deserialize)]
struct Service {
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default)]
    depends_on: BTreeMap<String, Dependency>,
    #[serde(default)]
    volumes: Vec<String>,
    healthcheck: Option<Healthcheck>,
}

#[derive(Debug, Deserialize)]
struct Healthcheck {
    test: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Dependency {
    condition: String,
}

fn read(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).expect(file)
}

#[test]
fn compose_runs_postgres_then_sitemapd_then_nginx_with_the_sample_config() {
    let compose: Compose =
        serde_saphyr::from_str(&read("docker-compose.yml")).expect("compose file parses");
    let service = |name: &str| {
        compose
            .services
            .get(name)
            .unwrap_or_else(|| panic!("service {name}"))
    };
    let postgres_check = &service("postgres")
        .healthcheck
        .as_ref()
        .expect("a health check")
        .test;
    assert!(
        postgres_check.contains(&"pg_isready".to_owned()),
        "{postgres_check:?}"
    );
    assert_eq!(
        service("sitemapd").depends_on["postgres"].condition,
        "service_healthy"
    );
    assert_eq!(
        service("nginx").depends_on["sitemapd"].condition,
        "service_healthy"
    );
    assert!(
        service("nginx")
            .volumes
            .iter()
            .any(|v| v.starts_with("./config/nginx.conf:/etc/nginx/nginx.conf"))
    );
    let base_url = &service("sitemapd").environment["SITEMAPD_BASE_URL"];
    let nginx = read("config/nginx.conf");
    let mount = base_url
        .split_once("//")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]));
    assert!(
        nginx.contains(&format!("location {} {{", mount.expect("a path"))),
        "nginx mounts sitemapd where its base URL says"
    );
    assert!(service("sitemapd").environment["DATABASE_URL"].contains("@postgres:5432/"));
}

#[test]
fn the_image_is_built_as_ci_checks_and_runs_unprivileged() {
    let dockerfile = read("Dockerfile");
    let build = "--release --locked --bin sitemapd";
    assert!(
        dockerfile.contains(&format!("RUN cargo build {build}")),
        "the Dockerfile's build"
    );
    assert!(
        read(".ci/run").contains(&format!("cargo check {build}")),
        "CI checks the Dockerfile's build"
    );
    assert!(dockerfile.contains("USER nonroot"));
    assert!(dockerfile.contains(r#"CMD ["/usr/local/bin/sitemapd", "health"]"#));
    assert!(
        dockerfile.contains(r#"ENTRYPOINT ["/usr/local/bin/sitemapd"]"#),
        "exec form: PID 1 gets SIGTERM"
    );
}

#[sqlx::test]
async fn the_health_check_command_asks_the_running_service(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let health = |listen: String| {
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sitemapd"))
                .arg("health")
                .env("SITEMAPD_LISTEN", listen)
                .output()
                .expect("the binary runs")
                .status
                .success()
        })
    };
    assert!(health(app.addr.to_string()).await.expect("ran"));
    // Nothing listens on port 1; a freed ephemeral port may be another
    // test's by the time it is dialled.
    assert!(!health("127.0.0.1:1".to_owned()).await.expect("ran"));
}

#[sqlx::test]
async fn sitemapd_robots_prints_a_line_per_index_file(pool: PgPool) {
    let printed = robots_command(
        &pool,
        &[
            ("SITEMAPD_BASE_URL", "https://www.example.com/"),
            (
                "SITEMAPD_SITES__SHOP__BASE_URL",
                "https://www.example.com/shop",
            ),
        ],
    )
    .await;
    assert_eq!(
        printed,
        "Sitemap: https://www.example.com/sitemap_index.xml\n\
         Sitemap: https://www.example.com/shop/sitemap_index.xml\n"
    );
}
