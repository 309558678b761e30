//! The migrations: one order, and the schema they build written out in
//! `schema.sql`.

use std::path::Path;
use std::process::Command;

use sqlx::PgPool;

use crate::helpers::{database_url, exec};

/// What `schema.sql` opens with.
const HEADER: &str = "\
-- The schema the migrations build, as pg_dump prints it from a freshly
-- migrated database (owners, privileges and sqlx's own table left out).
-- Each table's, column's and function's purpose is its comment.
--
-- Generated: do not edit. `BLESS=1 cargo test --test api schema_sql`
-- writes it again; the test fails when the migrations and this file differ.
";

/// pg_dump's text without what changes from run to run or from one
/// PostgreSQL version to the next: the random `\restrict` key, version
/// lines and session settings.
fn normalised(dump: &str) -> String {
    let kept: Vec<&str> = dump
        .lines()
        .filter(|line| {
            !(line.starts_with("\\restrict ")
                || line.starts_with("\\unrestrict ")
                || line.starts_with("-- Dumped from ")
                || line.starts_with("-- Dumped by ")
                || line.starts_with("SET ")
                || line.starts_with("SELECT pg_catalog.set_config("))
        })
        .collect();
    let mut text = String::from(HEADER);
    let mut blank_lines = 0;
    for line in kept {
        let line = line.trim_end();
        blank_lines = if line.is_empty() { blank_lines + 1 } else { 0 };
        if blank_lines <= 2 {
            text.push_str(line);
            text.push('\n');
        }
    }
    text.trim_end().to_owned() + "\n"
}

#[sqlx::test]
async fn schema_sql_is_the_schema_the_migrations_build(pool: PgPool) {
    let dump = Command::new("pg_dump")
        .args([
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            "--exclude-table=_sqlx_migrations",
            "--dbname",
        ])
        .arg(database_url(&pool))
        .output()
        .expect("pg_dump runs (scripts/test installs it)");
    assert!(
        dump.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let migrated = normalised(&String::from_utf8(dump.stdout).expect("UTF-8 dump"));
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema.sql");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&file, &migrated).expect("schema.sql written");
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    if committed == migrated {
        return;
    }
    let built = tempfile::NamedTempFile::new().expect("temporary file");
    std::fs::write(built.path(), &migrated).expect("dump written");
    let diff = Command::new("diff")
        .args(["-u", "--label", "schema.sql", "--label", "migrated"])
        .arg(&file)
        .arg(built.path())
        .output()
        .expect("diff runs");
    panic!(
        "schema.sql is not the schema the migrations build; if the migrations are right, \
         run `BLESS=1 cargo test --test api schema_sql` and commit the file:\n{}",
        String::from_utf8_lossy(&diff.stdout)
    );
}

#[sqlx::test]
async fn a_database_lacking_a_migration_older_than_one_it_applied_is_refused(pool: PgPool) {
    let versions = || async {
        sqlx::query_scalar::<_, i64>("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .expect("versions")
    };
    let all = versions().await;
    let (older, newest) = (all[all.len() / 2], all[all.len() - 1]);
    // As if that migration had been written after the newest one landed,
    // with a version below it.
    exec(
        &pool,
        &format!("DELETE FROM _sqlx_migrations WHERE version = {older}"),
    )
    .await;

    let error = sitemapd::store::Store::from_pool(pool.clone())
        .migrate()
        .await
        .expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "applied migration {newest} but not the older {older}"
        )),
        "{message}"
    );
    assert!(message.contains("nothing was applied"), "{message}");
    assert_eq!(
        versions().await,
        all.into_iter().filter(|v| *v != older).collect::<Vec<_>>(),
        "nothing applied"
    );
}
