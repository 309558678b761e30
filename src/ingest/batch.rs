//! A write API request's records: a JSON array, or JSON Lines (NDJSON).
//!
//! Each element is parsed on its own, so one malformed record is reported
//! at its position with the rest, instead of the whole body failing at a
//! byte offset. Only a body that is not a JSON array at all is refused
//! whole.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::formats::Position;
use super::import::Rejected;
use super::rule::Rule;
use super::validate::{FieldError, QUOTE_CHARS, RawRecord, Record, Validator};
use crate::quote::truncated;

/// How a request body holds its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchFormat {
    /// `application/json`: one array.
    JsonArray,
    /// `application/x-ndjson` (or `jsonl`): one value per line.
    Ndjson,
}

/// Why a body cannot be taken apart into records.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BatchError {
    #[error("the body is not a JSON array of records: {0}")]
    Malformed(String),
    #[error("{count} records, more than the {max} one request may hold")]
    TooMany { count: usize, max: usize },
}

/// A record to delete: its loc alone, or its loc and site.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum RecordKey {
    Loc(String),
    Keyed(KeyFields),
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyFields {
    loc: String,
    site: Option<String>,
}

impl From<RecordKey> for RawRecord {
    fn from(key: RecordKey) -> RawRecord {
        let (loc, site) = match key {
            RecordKey::Loc(loc) => (loc, None),
            RecordKey::Keyed(KeyFields { loc, site }) => (loc, site),
        };
        RawRecord {
            loc: Some(loc),
            site,
            ..RawRecord::default()
        }
    }
}

/// Each element of a batch with its position: parsed, or why it is not.
pub(crate) type Elements<T> = Vec<(Position, Result<T, FieldError>)>;

/// Every element of `body` as a `T` (or why it is not one), with its
/// position; more than `max` elements is an error before any is parsed.
pub(crate) fn elements<T: DeserializeOwned>(
    body: &[u8],
    format: BatchFormat,
    max: usize,
    expected: &str,
) -> Result<Elements<T>, BatchError> {
    let parse = |text: &str| {
        serde_json::from_str::<T>(text).map_err(|e| FieldError {
            field: "record".into(),
            value: truncated(text.trim(), QUOTE_CHARS),
            rule: Rule::Record {
                expected: expected.to_owned(),
                problem: e.to_string(),
                unknown_field_hint: false,
            },
        })
    };
    match format {
        BatchFormat::JsonArray => {
            let raw: Vec<&RawValue> =
                serde_json::from_slice(body).map_err(|e| BatchError::Malformed(e.to_string()))?;
            if raw.len() > max {
                return Err(BatchError::TooMany {
                    count: raw.len(),
                    max,
                });
            }
            Ok((0..)
                .zip(raw)
                .map(|(i, value)| (Position::Index(i), parse(value.get())))
                .collect())
        }
        BatchFormat::Ndjson => {
            let text = std::str::from_utf8(body)
                .map_err(|e| BatchError::Malformed(format!("not UTF-8 text ({e})")))?;
            let lines: Vec<(u64, &str)> = (1..)
                .zip(text.lines())
                .filter(|(_, line)| !line.trim().is_empty())
                .collect();
            if lines.len() > max {
                return Err(BatchError::TooMany {
                    count: lines.len(),
                    max,
                });
            }
            Ok(lines
                .into_iter()
                .map(|(n, line)| (Position::Line(n), parse(line)))
                .collect())
        }
    }
}

/// The records, all valid and normalised, or every rejection.
pub(crate) fn validate_all(
    validator: &Validator<'_>,
    elements: Elements<RawRecord>,
) -> Result<Vec<Record>, Vec<Rejected>> {
    let mut records = Vec::with_capacity(elements.len());
    let mut rejected = Vec::new();
    for (position, parsed) in elements {
        match validator.validate_parsed(parsed) {
            Ok(record) => records.push(record),
            Err(errors) => rejected.push(Rejected { position, errors }),
        }
    }
    if rejected.is_empty() {
        Ok(records)
    } else {
        Err(rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = "a JSON object of loc, lastmod, changefreq, priority, section, site";

    #[test]
    fn elements_keep_their_positions() {
        let body = br#"[{"loc": "https://e.com/a"}, 7, {"loc": "https://e.com/b", "colour": 1}]"#;
        let parsed =
            elements::<RawRecord>(body, BatchFormat::JsonArray, 10, RECORD).expect("an array");
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[0].0, Position::Index(0));
        assert!(parsed[0].1.is_ok());
        let error = parsed[1].1.as_ref().expect_err("not an object");
        assert_eq!(
            (error.field.as_str(), error.value.as_str()),
            ("record", "7")
        );
        let error = parsed[2].1.as_ref().expect_err("unknown field");
        assert!(
            matches!(&error.rule, Rule::Record { problem, .. } if problem.contains("unknown field `colour`")),
            "{error}"
        );
    }

    #[test]
    fn ndjson_counts_lines_and_skips_blank_ones() {
        let body = b"{\"loc\": \"https://e.com/a\"}\n\n{oops\n";
        let parsed = elements::<RawRecord>(body, BatchFormat::Ndjson, 2, RECORD).expect("lines");
        let positions: Vec<_> = parsed.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(positions, [Position::Line(1), Position::Line(3)]);
        assert!(parsed[1].1.is_err());
    }

    #[test]
    fn too_many_or_not_an_array_is_refused_whole() {
        let body = br#"[{"loc": "a"}, {"loc": "b"}, {"loc": "c"}]"#;
        assert!(matches!(
            elements::<RawRecord>(body, BatchFormat::JsonArray, 2, RECORD),
            Err(BatchError::TooMany { count: 3, max: 2 })
        ));
        assert!(matches!(
            elements::<RawRecord>(br#"{"loc": "a"}"#, BatchFormat::JsonArray, 2, RECORD),
            Err(BatchError::Malformed(_))
        ));
    }

    #[test]
    fn keys_are_a_loc_or_a_loc_and_site() {
        let body = br#"["https://e.com/a", {"loc": "https://e.com/b", "site": "shop"}, {"loc": "x", "lastmod": "2024"}]"#;
        let parsed =
            elements::<RecordKey>(body, BatchFormat::JsonArray, 10, "a loc").expect("an array");
        let raw: Vec<RawRecord> = parsed
            .into_iter()
            .filter_map(|(_, key)| key.ok().map(RawRecord::from))
            .collect();
        assert_eq!(raw.len(), 2, "a key with other fields is refused");
        assert_eq!(raw[0].loc.as_deref(), Some("https://e.com/a"));
        assert_eq!(raw[1].site.as_deref(), Some("shop"));
    }
}
