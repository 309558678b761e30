//! The rules a record's fields are held to, one variant each. A refusal
//! names its rule; the words are its `Display`, what the value must be, as
//! import, the write API and the schema's CHECKs word it.

use std::fmt;

use time::OffsetDateTime;

use crate::sitemap::name::SLUG_RULE;
use crate::sitemap::writer::MAX_LOC_CHARS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Required,
    /// A record that is not a JSON object of the fields sitemapd knows.
    Record {
        /// What a record is, as the input names it.
        expected: String,
        /// The parser's complaint.
        problem: String,
        /// Whether to suggest `--ignore-unknown-fields`.
        unknown_field_hint: bool,
    },
    ConfiguredSite {
        known: Vec<String>,
    },
    Slug,
    OneOf(&'static [&'static str]),
    /// A lastmod: any W3C datetime profile.
    W3cDatetime,
    /// An extension's date: the profiles that are also XML Schema dates.
    W3cDateOrDateTime,
    NotInFuture {
        now: OffsetDateTime,
    },
    NotInFutureFirstPublication,
    /// A visibility window's end: after its start.
    AfterVisibleFrom {
        visible_from: String,
    },
    NumberFrom {
        from: &'static str,
        to: &'static str,
    },
    NoWhitespace {
        character: char,
        byte_offset: usize,
    },
    AbsoluteUrl {
        problem: String,
    },
    /// Not an http(s) URL with a host and without credentials.
    WebUrl(&'static str),
    NoFragment,
    ValidUri {
        problem: &'static str,
        byte_offset: usize,
    },
    LocLength,
    UnderBaseUrl {
        base_url: String,
    },
    AbsoluteHttpUrl,
    NotThePagesOwnLoc,
    OnTheLocsHost,
    UnderAServedSite,
    JsonObject,
    JsonArrayOf(&'static str),
    NotAFieldOf {
        kind: String,
        fields: Vec<String>,
    },
    Deprecated,
    NonEmptyString,
    AtMostChars(usize),
    NoControlCharacters,
    AtMostImages,
    ContentOrPlayerLoc,
    DurationSeconds,
    WholeNumber,
    Boolean,
    AllowOrDeny,
    Country,
    Platform,
    /// An array whose items follow `of`.
    ArrayOf(Box<Rule>),
    AtMostTags,
    NewsLanguage,
    Hreflang,
    HreflangOnce {
        first: String,
    },
    ListsItsOwnLoc,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Required => f.write_str("required"),
            Rule::Record {
                expected,
                problem,
                unknown_field_hint,
            } => {
                write!(f, "{expected} ({problem})")?;
                if *unknown_field_hint {
                    f.write_str(
                        "; pass --ignore-unknown-fields to ignore the fields sitemapd does not know",
                    )?;
                }
                Ok(())
            }
            Rule::ConfiguredSite { known } if known.is_empty() => {
                f.write_str("an existing site (GET /api/v1/sites or `sitemapd sites list` lists them)")
            }
            Rule::ConfiguredSite { known } => {
                write!(f, "a configured site ({})", known.join(", "))
            }
            Rule::Slug => write!(f, "a slug: {SLUG_RULE}"),
            Rule::OneOf(values) => write!(f, "one of {}", values.join(", ")),
            Rule::W3cDatetime => f.write_str(
                "a W3C datetime: YYYY, YYYY-MM, YYYY-MM-DD, or YYYY-MM-DDThh:mm[:ss[.s]] with Z or ±hh:mm",
            ),
            Rule::W3cDateOrDateTime => f.write_str(
                "a W3C datetime: YYYY-MM-DD, or YYYY-MM-DDThh:mm[:ss[.s]] with Z or ±hh:mm",
            ),
            Rule::NotInFuture { now } => write!(f, "not in the future (now is {now})"),
            Rule::NotInFutureFirstPublication => {
                f.write_str("not in the future (the article's first publication)")
            }
            Rule::AfterVisibleFrom { visible_from } => write!(
                f,
                "later than visible_from ({visible_from}): a window that closes before it opens lists the row never"
            ),
            Rule::NumberFrom { from, to } => write!(f, "a number from {from} to {to}"),
            Rule::NoWhitespace {
                character,
                byte_offset,
            } => write!(
                f,
                "no whitespace or control characters ({character:?} at byte {byte_offset})"
            ),
            Rule::AbsoluteUrl { problem } => write!(f, "an absolute URL ({problem})"),
            Rule::WebUrl(rule) => f.write_str(rule),
            Rule::NoFragment => f.write_str("a URL without #fragment (crawlers drop it)"),
            Rule::ValidUri {
                problem,
                byte_offset,
            } => write!(f, "a valid URI ({problem} at byte {byte_offset})"),
            Rule::LocLength => write!(f, "at most {MAX_LOC_CHARS} characters, once normalised"),
            Rule::UnderBaseUrl { base_url } => {
                write!(f, "under the site's base URL {base_url}")
            }
            Rule::AbsoluteHttpUrl => f.write_str("an absolute http(s) URL"),
            Rule::NotThePagesOwnLoc => f.write_str("not the page's own loc"),
            Rule::OnTheLocsHost => f.write_str("a URL on the loc's host"),
            Rule::UnderAServedSite => f.write_str(
                "a URL under a configured site's base URL: each member is a row of its own \
                 (one on a host sitemapd does not serve is written with SQL as a row of an \
                 unserved site; see docs/guide.md, hreflang alternates)",
            ),
            Rule::JsonObject => f.write_str("a JSON object"),
            Rule::JsonArrayOf(items) => write!(f, "a JSON array of {items}"),
            Rule::NotAFieldOf { kind, fields } => {
                write!(f, "not a field of {kind} ({})", fields.join(", "))
            }
            Rule::Deprecated => {
                f.write_str("deprecated by Google in 2022; sitemapd never serves it")
            }
            Rule::NonEmptyString => f.write_str("a non-empty string"),
            Rule::AtMostChars(max) => write!(f, "at most {max} characters"),
            Rule::NoControlCharacters => {
                f.write_str("no control characters (XML cannot carry them)")
            }
            Rule::AtMostImages => f.write_str("at most 1,000 images per URL"),
            Rule::ContentOrPlayerLoc => f.write_str("content_loc or player_loc is required"),
            Rule::DurationSeconds => f.write_str("whole seconds from 1 to 28800"),
            Rule::WholeNumber => f.write_str("a whole number, 0 or more"),
            Rule::Boolean => f.write_str("true or false (served as yes / no)"),
            Rule::AllowOrDeny => f.write_str("allow or deny"),
            Rule::Country => {
                f.write_str("an ISO 3166-1 alpha-2 country code in upper case (FR, US, …)")
            }
            Rule::Platform => f.write_str("web, mobile or tv"),
            Rule::ArrayOf(item) => write!(f, "an array: {item}"),
            Rule::AtMostTags => f.write_str("at most 32 tags"),
            Rule::NewsLanguage => f.write_str(
                "an ISO 639 language code in lower case (en, de, …), or zh-cn / zh-tw",
            ),
            Rule::Hreflang => f.write_str(
                "an ISO 639-1 language, optionally with an ISO 3166-1 alpha-2 region (de, de-AT), or x-default",
            ),
            Rule::HreflangOnce { first } => {
                write!(f, "each hreflang once per cluster (also given to {first})")
            }
            Rule::ListsItsOwnLoc => {
                f.write_str("must list the record's own loc (every member lists itself)")
            }
        }
    }
}
