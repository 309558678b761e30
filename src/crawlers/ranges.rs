//! The address ranges each crawler family publishes, read from
//! `crawler_ranges_dir`: one `<family>.json` per family, in the shape Google
//! and Bing publish (`{"prefixes":[{"ipv4Prefix":…},{"ipv6Prefix":…}]}`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ipnet::IpNet;
use serde::Deserialize;

use super::family::Family;

#[derive(Debug, thiserror::Error)]
pub(crate) enum RangesError {
    #[error("crawler_ranges_dir {dir}: {source}")]
    Directory {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{file}: not a ranges file in the published shape ({{\"prefixes\":[{{\"ipv4Prefix\":…}}]}}): {source}"
    )]
    Shape {
        file: PathBuf,
        source: serde_json::Error,
    },
    #[error("{file}: prefix {index} ({prefix:?}): {problem}")]
    Prefix {
        file: PathBuf,
        index: usize,
        prefix: String,
        problem: String,
    },
    #[error(
        "{file}: no crawler family is named {name:?} (the files are named after the families: {families})"
    )]
    UnknownFamily {
        file: PathBuf,
        name: String,
        families: String,
    },
}

#[derive(Deserialize)]
struct Published {
    prefixes: Vec<Prefix>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Prefix {
    ipv4_prefix: Option<String>,
    ipv6_prefix: Option<String>,
}

/// One family's ranges, disjoint and sorted, for a binary search.
#[derive(Debug, Default, Clone)]
struct Spans {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl Spans {
    fn contains(&self, address: IpAddr) -> bool {
        match address.to_canonical() {
            IpAddr::V4(v4) => within(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => within(&self.v6, u128::from(v6)),
        }
    }
}

fn within<T: Ord + Copy>(spans: &[(T, T)], address: T) -> bool {
    let after = spans.partition_point(|&(start, _)| start <= address);
    after > 0 && address <= spans[after - 1].1
}

fn merged<T: Ord + Copy>(mut spans: Vec<(T, T)>, next: impl Fn(T) -> Option<T>) -> Vec<(T, T)> {
    spans.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match out.last_mut() {
            Some(last) if next(last.1).is_none_or(|after| start <= after) => {
                last.1 = last.1.max(end);
            }
            _ => out.push((start, end)),
        }
    }
    out
}

/// Every family's ranges that the directory holds a file for.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ranges {
    families: BTreeMap<Family, Spans>,
}

/// What the directory held when it was read: each file's name, length and
/// modification time, to tell when to read it again.
pub(crate) type Snapshot = Vec<(PathBuf, u64, Option<SystemTime>)>;

impl Ranges {
    /// Whether `family` publishes ranges here, and if so whether `address`
    /// is in them.
    pub(crate) fn verdict(&self, family: Family, address: IpAddr) -> Option<bool> {
        self.families
            .get(&family)
            .map(|spans| spans.contains(address))
    }

    /// The families with a ranges file.
    pub(crate) fn families(&self) -> impl Iterator<Item = Family> + '_ {
        self.families.keys().copied()
    }

    /// Reads every `*.json` of `dir` (other files are left alone).
    pub(crate) fn read(dir: &Path) -> Result<(Ranges, Snapshot), RangesError> {
        let snapshot = snapshot(dir)?;
        let mut ranges = Ranges::default();
        for (file, _, _) in &snapshot {
            let name = file
                .file_stem()
                .and_then(|stem| stem.to_str())
                .unwrap_or_default();
            let family = Family::named(name).ok_or_else(|| RangesError::UnknownFamily {
                file: file.clone(),
                name: name.to_owned(),
                families: Family::CRAWLERS.map(Family::name).join(", "),
            })?;
            ranges.families.insert(family, read_file(file)?);
        }
        Ok((ranges, snapshot))
    }
}

/// The `*.json` files of `dir` with their lengths and modification times,
/// by name.
pub(crate) fn snapshot(dir: &Path) -> Result<Snapshot, RangesError> {
    let directory = |source| RangesError::Directory {
        dir: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(directory)? {
        let path = entry.map_err(directory)?.path();
        if path
            .extension()
            .is_some_and(|extension| extension == "json")
        {
            let metadata = std::fs::metadata(&path).map_err(|source| RangesError::Read {
                file: path.clone(),
                source,
            })?;
            files.push((path, metadata.len(), metadata.modified().ok()));
        }
    }
    files.sort();
    Ok(files)
}

fn read_file(file: &Path) -> Result<Spans, RangesError> {
    let text = std::fs::read(file).map_err(|source| RangesError::Read {
        file: file.to_owned(),
        source,
    })?;
    let published: Published =
        serde_json::from_slice(&text).map_err(|source| RangesError::Shape {
            file: file.to_owned(),
            source,
        })?;
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for (index, prefix) in published.prefixes.iter().enumerate() {
        let problem = |prefix: &str, problem: &str| RangesError::Prefix {
            file: file.to_owned(),
            index,
            prefix: prefix.to_owned(),
            problem: problem.to_owned(),
        };
        match (&prefix.ipv4_prefix, &prefix.ipv6_prefix) {
            (Some(text), None) => match text.parse::<IpNet>() {
                Ok(IpNet::V4(net)) => {
                    v4.push((u32::from(net.network()), u32::from(net.broadcast())));
                }
                Ok(IpNet::V6(_)) => return Err(problem(text, "an IPv6 prefix as ipv4Prefix")),
                Err(_) => return Err(problem(text, "not an address/length")),
            },
            (None, Some(text)) => match text.parse::<IpNet>() {
                Ok(IpNet::V6(net)) => {
                    v6.push((u128::from(net.network()), u128::from(net.broadcast())));
                }
                Ok(IpNet::V4(_)) => return Err(problem(text, "an IPv4 prefix as ipv6Prefix")),
                Err(_) => return Err(problem(text, "not an address/length")),
            },
            _ => {
                return Err(problem(
                    "",
                    "each prefix has either ipv4Prefix or ipv6Prefix",
                ));
            }
        }
    }
    Ok(Spans {
        v4: merged(v4, |end: u32| end.checked_add(1)),
        v6: merged(v6, |end: u128| end.checked_add(1)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("test input");
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("test input");
        }
        dir
    }

    #[test]
    fn addresses_are_in_their_familys_ranges_and_nowhere_else() {
        let dir = dir_with(&[
            (
                "googlebot.json",
                r#"{"creationTime":"2026-11-01T00:00:00.000000","prefixes":[
                    {"ipv6Prefix":"2001:4860:4801:10::/64"},{"ipv4Prefix":"66.249.64.0/27"},
                    {"ipv4Prefix":"66.249.64.32/27"},{"ipv4Prefix":"192.178.5.0/27"}]}"#,
            ),
            (
                "bingbot.json",
                r#"{"prefixes":[{"ipv4Prefix":"157.55.39.0/24"}]}"#,
            ),
            ("README", "not read"),
        ]);
        let (ranges, snapshot) = Ranges::read(dir.path()).expect("test input");
        assert_eq!(snapshot.len(), 2);
        let google = |a: &str| ranges.verdict(Family::Googlebot, a.parse().expect("test input"));
        assert_eq!(google("66.249.64.0"), Some(true));
        assert_eq!(google("66.249.64.63"), Some(true));
        assert_eq!(google("66.249.64.64"), Some(false));
        assert_eq!(google("192.178.5.31"), Some(true));
        assert_eq!(google("2001:4860:4801:10::1"), Some(true));
        assert_eq!(google("2001:4860:4801:11::1"), Some(false));
        assert_eq!(google("::ffff:66.249.64.10"), Some(true));
        assert_eq!(google("157.55.39.1"), Some(false));
        assert_eq!(
            ranges.verdict(Family::Bingbot, "157.55.39.1".parse().expect("test input")),
            Some(true)
        );
        assert_eq!(
            ranges.verdict(Family::Yandex, "157.55.39.1".parse().expect("test input")),
            None
        );
    }

    #[test]
    fn a_bad_file_is_named_with_what_is_wrong() {
        let cases = [
            ("googlebot.json", "{", "googlebot.json: not a ranges file"),
            (
                "googlebot.json",
                r#"{"prefixes":[{"ipv4Prefix":"66.249.64.0/27"},{"ipv4Prefix":"66.249.64/27"}]}"#,
                "googlebot.json: prefix 1 (\"66.249.64/27\"): not an address/length",
            ),
            (
                "bingbot.json",
                r#"{"prefixes":[{"ipv4Prefix":"2001:db8::/32"}]}"#,
                "bingbot.json: prefix 0 (\"2001:db8::/32\"): an IPv6 prefix as ipv4Prefix",
            ),
            (
                "googlebots.json",
                r#"{"prefixes":[]}"#,
                "googlebots.json: no crawler family is named \"googlebots\"",
            ),
        ];
        for (name, text, expected) in cases {
            let dir = dir_with(&[(name, text)]);
            let error = Ranges::read(dir.path()).expect_err("refused").to_string();
            assert!(error.contains(expected), "{error}");
        }
        let error = Ranges::read(Path::new("/nonexistent/ranges"))
            .expect_err("refused")
            .to_string();
        assert!(
            error.starts_with("crawler_ranges_dir /nonexistent/ranges:"),
            "{error}"
        );
    }
}
