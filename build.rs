// Rebuild when a migration changes: `sqlx::migrate!()` embeds them. And
// name the commit the binary is built from, for `sitemapd --version`.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=BUILT_FROM_COMMIT");
    let commit = std::env::var("BUILT_FROM_COMMIT").ok().or_else(|| {
        let output = Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()?;
        let commit = String::from_utf8(output.stdout).ok()?;
        (output.status.success() && !commit.trim().is_empty()).then(|| commit.trim().to_owned())
    });
    let commit = commit.unwrap_or_else(|| "commit unknown".to_owned());
    println!("cargo:rustc-env=BUILT_FROM_COMMIT={commit}");
}
