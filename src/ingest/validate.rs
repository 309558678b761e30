//! One rulebook for what a valid record is, used by every way records come
//! in (import files, the write API), so a record accepted by one is accepted
//! by all and stored the same way.
//!
//! Locs are normalised once, here, to the WHATWG URL serialisation: scheme
//! and host lower-cased, IDN hosts in punycode, default ports dropped, dot
//! segments resolved, non-ASCII percent-encoded as UTF-8. So the stored loc
//! is exactly what sitemaps serve, and `…/café` and `…/caf%C3%A9` cannot
//! become two rows for one page. Whitespace and control characters are
//! refused rather than encoded: they are almost always a bug upstream.

use std::fmt;

use serde::{Deserialize, Serialize};
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};
use url::Url;

use super::extensions::{Checker, Membership};
use super::rule::Rule;
use crate::quote::truncated;
use crate::site::Site;
use crate::sitemap::extensions::{Alternate, Image, News, Video};
use crate::sitemap::name::is_section_slug;
use crate::sitemap::writer::MAX_LOC_CHARS;
use crate::sitemap::{CHANGEFREQS, web_url_problem};

/// How far in the future a lastmod may be, for clocks that disagree a little.
pub(crate) const CLOCK_SKEW: time::Duration = time::Duration::minutes(5);

/// Values quoted in errors are cut to this many characters.
pub(crate) const QUOTE_CHARS: usize = 100;

/// The fields of [`RawRecord`], by their JSON names.
pub(crate) const RECORD_FIELDS: [&str; 12] = [
    "loc",
    "lastmod",
    "changefreq",
    "priority",
    "section",
    "site",
    "alternates",
    "images",
    "videos",
    "news",
    "visible_from",
    "visible_until",
];

/// A record on the wire: what import and the write API take, every field
/// optional text checked by [`Validator::validate`], and what the write API
/// answers a record with.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRecord {
    /// Absolute http(s) URL under the site's base URL, at most 2,048 characters.
    pub loc: Option<String>,
    /// W3C datetime: YYYY, YYYY-MM, YYYY-MM-DD, or with time and zone.
    pub lastmod: Option<String>,
    /// always, hourly, daily, weekly, monthly, yearly or never.
    pub changefreq: Option<String>,
    /// 0.0 to 1.0, as a number or a string.
    #[serde(
        default,
        deserialize_with = "number_or_text",
        serialize_with = "number_if_one"
    )]
    #[schema(value_type = Option<f64>)]
    pub priority: Option<String>,
    /// A slug (default: the default section).
    pub section: Option<String>,
    /// A configured site (default: the primary site).
    pub site: Option<String>,
    /// hreflang alternates, the record's own loc among them:
    /// `[{"hreflang": "de-AT", "href": "https://…"}]`.
    #[schema(value_type = Option<Vec<Alternate>>)]
    pub alternates: Option<serde_json::Value>,
    /// At most 1,000 images: `[{"loc": "https://…"}]`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub images: Option<serde_json::Value>,
    /// Videos: `[{"thumbnail_loc", "title", "description", "content_loc" or
    /// "player_loc", …}]`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub videos: Option<serde_json::Value>,
    /// A Google News article: `{"publication_name", "language",
    /// "publication_date", "title"}`.
    #[schema(value_type = Option<Object>)]
    pub news: Option<serde_json::Value>,
    /// W3C datetime when the URL enters the sitemaps (default: at once).
    pub visible_from: Option<String>,
    /// W3C datetime when it leaves them (default: never); later than
    /// `visible_from`.
    pub visible_until: Option<String>,
}

/// A valid record, normalised, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub(crate) site: String,
    pub(crate) section: String,
    pub loc: String,
    pub(crate) lastmod: Option<OffsetDateTime>,
    pub(crate) changefreq: Option<&'static str>,
    pub(crate) priority: Option<f32>,
    pub(crate) images: Option<Vec<Image>>,
    pub(crate) videos: Option<Vec<Video>>,
    pub(crate) news: Option<News>,
    pub(crate) membership: Option<Membership>,
    pub(crate) visible_from: Option<OffsetDateTime>,
    pub(crate) visible_until: Option<OffsetDateTime>,
}

/// One broken rule: which field, the value (cut short), and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub(crate) value: String,
    pub rule: Rule,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}: {}", self.field, self.value, self.rule)
    }
}

/// Checks records against the configured sites, as of a moment.
#[derive(Debug, Clone)]
pub struct Validator<'a> {
    sites: &'a [Site],
    /// The site of records that name none (the primary site, or `--site`).
    default_site: &'a str,
    /// The section of records that name none (`""`, or `--section`).
    default_section: &'a str,
    now: OffsetDateTime,
    /// Whether an unknown site's error lists the known ones.
    lists_sites: bool,
}

impl<'a> Validator<'a> {
    pub fn new(
        sites: &'a [Site],
        default_site: &'a str,
        default_section: &'a str,
        now: OffsetDateTime,
    ) -> Self {
        Validator {
            sites,
            default_site,
            default_section,
            now,
            lists_sites: true,
        }
    }

    /// An unknown site's error names no other: what a validator given only
    /// the sites a batch names (of many) gives.
    pub(crate) fn without_listing_sites(self) -> Self {
        Validator {
            lists_sites: false,
            ..self
        }
    }

    /// What a reader parsed, validated: the reader's own error (a record
    /// that could not be parsed) or every rule the record breaks.
    pub(crate) fn validate_parsed(
        &self,
        parsed: Result<RawRecord, FieldError>,
    ) -> Result<Record, Vec<FieldError>> {
        parsed
            .map_err(|e| vec![e])
            .and_then(|raw| self.validate(&raw))
    }

    /// The record, valid and normalised, or every rule it breaks.
    pub fn validate(&self, raw: &RawRecord) -> Result<Record, Vec<FieldError>> {
        let mut errors = Vec::new();
        let site_name = raw.site.as_deref().unwrap_or(self.default_site);
        let site = self.sites.iter().find(|s| s.name == site_name);
        if site.is_none() {
            let known: Vec<&str> = if self.lists_sites {
                self.sites.iter().map(|s| s.name.as_str()).collect()
            } else {
                Vec::new()
            };
            errors.push(error(
                "site",
                site_name,
                Rule::ConfiguredSite {
                    known: known.into_iter().map(str::to_owned).collect(),
                },
            ));
        }
        let section = raw.section.as_deref().unwrap_or(self.default_section);
        if !section.is_empty() && !is_section_slug(section) {
            errors.push(error("section", section, Rule::Slug));
        }
        let loc = match raw.loc.as_deref() {
            None | Some("") => {
                errors.push(error("loc", "", Rule::Required));
                None
            }
            Some(loc) => check_loc(loc, site)
                .map_err(|rule| errors.push(error("loc", loc, rule)))
                .ok(),
        };
        let lastmod = raw.lastmod.as_deref().and_then(|value| {
            parse_w3c_datetime(value)
                .ok_or(Rule::W3cDatetime)
                .and_then(|at| {
                    if at > self.now + CLOCK_SKEW {
                        Err(Rule::NotInFuture { now: self.now })
                    } else {
                        Ok(at)
                    }
                })
                .map_err(|rule| errors.push(error("lastmod", value, rule)))
                .ok()
        });
        let mut moment = |field: &'static str, value: Option<&str>| {
            value.and_then(|value| {
                let at = parse_w3c_datetime(value);
                if at.is_none() {
                    errors.push(error(field, value, Rule::W3cDatetime));
                }
                at
            })
        };
        let visible_from = moment("visible_from", raw.visible_from.as_deref());
        let visible_until = moment("visible_until", raw.visible_until.as_deref());
        if let (Some(from), Some(until)) = (visible_from, visible_until)
            && until <= from
        {
            errors.push(error(
                "visible_until",
                raw.visible_until.as_deref().unwrap_or_default(),
                Rule::AfterVisibleFrom {
                    visible_from: raw.visible_from.clone().unwrap_or_default(),
                },
            ));
        }
        let changefreq = raw.changefreq.as_deref().and_then(|value| {
            let lower = value.to_ascii_lowercase();
            let found = CHANGEFREQS.iter().copied().find(|c| *c == lower);
            if found.is_none() {
                errors.push(error("changefreq", value, Rule::OneOf(&CHANGEFREQS)));
            }
            found
        });
        let priority = raw.priority.as_deref().and_then(|value| {
            match value.trim().parse::<f64>() {
                Ok(p) if (0.0..=1.0).contains(&p) => return Some(p as f32),
                _ => errors.push(error(
                    "priority",
                    value,
                    Rule::NumberFrom {
                        from: "0.0",
                        to: "1.0",
                    },
                )),
            }
            None
        });
        let (mut images, mut videos, mut news, mut membership) = (None, None, None, None);
        if let Some(loc) = &loc {
            let served = |url: &str| self.sites.iter().any(|s| check_loc(url, Some(s)).is_ok());
            let mut checker = Checker {
                loc,
                now: self.now,
                errors: &mut errors,
                served: &served,
            };
            images = raw.images.as_ref().and_then(|v| checker.images(v));
            videos = raw.videos.as_ref().and_then(|v| checker.videos(v));
            news = raw.news.as_ref().and_then(|v| checker.news(v));
            membership = raw
                .alternates
                .as_ref()
                .and_then(|v| checker.alternates(v))
                .flatten();
        }
        match (errors.is_empty(), loc, site) {
            (true, Some(loc), Some(site)) => Ok(Record {
                site: site.name.clone(),
                section: section.to_owned(),
                loc,
                lastmod,
                changefreq,
                priority,
                images: images.filter(|i| !i.is_empty()),
                videos: videos.filter(|v| !v.is_empty()),
                news,
                membership,
                visible_from,
                visible_until,
            }),
            _ => Err(errors),
        }
    }
}

/// The normalised loc, or the rule it breaks (outside any site's scope
/// when `site` is `None`).
pub(crate) fn check_loc(loc: &str, site: Option<&Site>) -> Result<String, Rule> {
    match site {
        Some(site) if is_plainly_normal_under(loc, site) => Ok(loc.to_owned()),
        _ => parse_loc(loc, site),
    }
}

/// Bytes the URL parser leaves as they are in a path or query of an http(s)
/// URL (percent signs are checked apart). Conservative: `'`, `\`, `|`, `^`,
/// brackets, braces and the like are left to the parser.
const PLAIN_LOC_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
                    | b'/'
                    | b'?'
                    | b'%'
            );
        b += 1;
    }
    table
};

/// Whether `loc` is under `site`'s base URL and already exactly what
/// parsing would make of it, so that the full parse (most of an import's
/// reading time) can be skipped: ASCII from [`PLAIN_LOC_BYTES`], every `%`
/// followed by two hex digits, no dot segment (nor an encoded dot, which
/// the parser treats as one) in the path. Anything else goes to
/// [`parse_loc`].
fn is_plainly_normal_under(loc: &str, site: &Site) -> bool {
    let Some(rest) = loc.strip_prefix(site.base_url.as_str()) else {
        return false;
    };
    if loc.len() > MAX_LOC_CHARS {
        return false;
    }
    let bytes = rest.as_bytes();
    let mut in_path = true;
    let mut segment_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !PLAIN_LOC_BYTES[usize::from(b)] {
            return false;
        }
        match b {
            b'%' => {
                let hex = (bytes.get(i + 1).copied(), bytes.get(i + 2).copied());
                match hex {
                    (Some(b'2'), Some(b'e' | b'E')) if in_path => return false,
                    (Some(high), Some(low))
                        if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {}
                    _ => return false,
                }
            }
            b'/' | b'?' if in_path => {
                if matches!(&bytes[segment_start..i], b"." | b"..") {
                    return false;
                }
                segment_start = i + 1;
                in_path = b == b'/';
            }
            _ => {}
        }
    }
    !(in_path && matches!(&bytes[segment_start..], b"." | b".."))
}

/// [`check_loc`] the long way: the URL parser's normal form, then every
/// rule.
fn parse_loc(loc: &str, site: Option<&Site>) -> Result<String, Rule> {
    if let Some((byte_offset, character)) = loc
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || c.is_control())
    {
        return Err(Rule::NoWhitespace {
            character,
            byte_offset,
        });
    }
    let url = Url::parse(loc).map_err(|e| Rule::AbsoluteUrl {
        problem: e.to_string(),
    })?;
    if let Some(rule) = web_url_problem(&url) {
        return Err(Rule::WebUrl(rule));
    }
    if url.fragment().is_some() {
        return Err(Rule::NoFragment);
    }
    let normalised = String::from(url);
    if let Some((byte_offset, problem)) = crate::sitemap::writer::uri_problem(&normalised) {
        return Err(Rule::ValidUri {
            problem,
            byte_offset,
        });
    }
    if normalised.chars().count() > MAX_LOC_CHARS {
        return Err(Rule::LocLength);
    }
    if let Some(site) = site {
        let under_base = normalised
            .strip_prefix(&site.origin)
            .is_some_and(|path| path.starts_with(&site.path_prefix));
        if !under_base {
            return Err(Rule::UnderBaseUrl {
                base_url: site.base_url.clone(),
            });
        }
    }
    Ok(normalised)
}

/// Parses the W3C datetime profile of ISO 8601 (YYYY, YYYY-MM, YYYY-MM-DD,
/// then hh:mm, hh:mm:ss or hh:mm:ss.s with a zone designator) into UTC.
pub(crate) fn parse_w3c_datetime(value: &str) -> Option<OffsetDateTime> {
    let (date, time) = match value.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (value, None),
    };
    let mut parts = date.split('-');
    let year: i32 = digits(parts.next()?, 4)?;
    let month: u8 = parts.next().map_or(Some(1), |m| digits(m, 2))?;
    let day: u8 = parts.next().map_or(Some(1), |d| digits(d, 2))?;
    if parts.next().is_some() || (time.is_some() && date.len() != 10) {
        return None;
    }
    let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
    let Some(time) = time else {
        return Some(date.midnight().assume_utc());
    };
    let (clock, offset) = if let Some(clock) = time.strip_suffix('Z') {
        (clock, UtcOffset::UTC)
    } else {
        let sign_at = time.rfind(['+', '-'])?;
        let (clock, zone) = time.split_at(sign_at);
        let (hours, minutes) = zone[1..].split_once(':')?;
        let (hours, minutes): (i8, i8) = (digits(hours, 2)?, digits(minutes, 2)?);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        (
            clock,
            UtcOffset::from_hms(sign * hours, sign * minutes, 0).ok()?,
        )
    };
    let mut fields = clock.split(':');
    let hour: u8 = digits(fields.next()?, 2)?;
    let minute: u8 = digits(fields.next()?, 2)?;
    let (second, nanos) = match fields.next() {
        None => (0, 0),
        Some(seconds) => {
            let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
            let second: u8 = digits(whole, 2)?;
            if seconds.contains('.')
                && (fraction.is_empty() || !fraction.bytes().all(|b| b.is_ascii_digit()))
            {
                return None;
            }
            // Digits past the ninth are below a nanosecond: dropped.
            let digits = &fraction.as_bytes()[..fraction.len().min(9)];
            let nanos = digits
                .iter()
                .fold(0_u32, |n, digit| n * 10 + u32::from(digit - b'0'))
                * 10_u32.pow(9 - digits.len() as u32);
            (second, nanos)
        }
    };
    if fields.next().is_some() {
        return None;
    }
    let time = Time::from_hms_nano(hour, minute, second, nanos).ok()?;
    Some(
        PrimitiveDateTime::new(date, time)
            .assume_offset(offset)
            .to_offset(UtcOffset::UTC),
    )
}

/// Exactly `n` ASCII digits, parsed.
fn digits<T: std::str::FromStr>(s: &str, n: usize) -> Option<T> {
    if s.len() == n && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

fn error(field: &'static str, value: &str, rule: Rule) -> FieldError {
    field_error(field.to_owned(), value, rule)
}

pub(super) fn field_error(field: String, value: &str, rule: Rule) -> FieldError {
    FieldError {
        field,
        value: truncated(value, QUOTE_CHARS),
        rule,
    }
}

/// Priority as JSON writes it: a number, as the record's text holds one.
fn number_if_one<S: serde::Serializer>(
    priority: &Option<String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match priority.as_deref().map(|text| (text, text.parse::<f64>())) {
        None => serializer.serialize_none(),
        Some((_, Ok(number))) => serializer.serialize_f64(number),
        Some((text, Err(_))) => serializer.serialize_str(text),
    }
}

/// JSON may give priority as a number or as text; both become text here.
fn number_or_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }
    Ok(
        Option::<NumberOrText>::deserialize(deserializer)?.map(|v| match v {
            NumberOrText::Number(n) => tenth_f64(n).map_or_else(|| n.to_string(), str::to_owned),
            NumberOrText::Text(t) => t,
        }),
    )
}

/// The tenths from 0 to 1 as `{}` writes them: most priorities are one of
/// these, and formatting a float is a large part of reading a record.
const TENTHS: [&str; 11] = [
    "0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1",
];

/// `value` as `{}` writes it, when it is a tenth from 0 to 1.
pub(crate) fn tenth_f64(value: f64) -> Option<&'static str> {
    let tenths = (value * 10.0).round();
    (value.is_sign_positive() && (0.0..=10.0).contains(&tenths) && tenths / 10.0 == value)
        .then(|| TENTHS[tenths as usize])
}

/// `value` as `{}` writes it, when it is a tenth from 0 to 1.
pub(crate) fn tenth_f32(value: f32) -> Option<&'static str> {
    let tenths = (value * 10.0).round();
    (value.is_sign_positive() && (0.0..=10.0).contains(&tenths) && tenths / 10.0 == value)
        .then(|| TENTHS[tenths as usize])
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::config::Settings;

    const NOW: OffsetDateTime = datetime!(2026-11-21 12:00 UTC);

    #[test]
    fn record_fields_name_every_field_a_record_has() {
        let every: serde_json::Map<String, serde_json::Value> = RECORD_FIELDS
            .iter()
            .map(|name| ((*name).to_owned(), serde_json::json!("x")))
            .collect();
        let record: RawRecord =
            serde_json::from_value(every.into()).expect("every listed field is known");
        // No `..`: a field added to RawRecord fails to compile here until
        // it is listed in RECORD_FIELDS too.
        let RawRecord {
            loc,
            lastmod,
            changefreq,
            priority,
            section,
            site,
            alternates,
            images,
            videos,
            news,
            visible_from,
            visible_until,
        } = record;
        let texts = [
            loc,
            lastmod,
            changefreq,
            priority,
            section,
            site,
            visible_from,
            visible_until,
        ];
        assert!(texts.iter().all(Option::is_some), "{texts:?}");
        let extensions = [alternates, images, videos, news];
        assert!(extensions.iter().all(Option::is_some), "{extensions:?}");
        assert_eq!(RECORD_FIELDS.len(), texts.len() + extensions.len());
    }

    fn sites() -> Vec<Site> {
        let mut settings = Settings::defaults();
        settings.base_url = "https://www.example.com/shop/".into();
        settings.sites.insert(
            "blog".into(),
            crate::config::SiteSettings {
                base_url: "https://blog.example.org/".into(),
                include_subfolder_sites: false,
                indexnow_key: None,
                robots_txt: None,
                robots_file: None,
                ..crate::config::SiteSettings::default()
            },
        );
        crate::config::Config::new(settings).expect("valid").sites
    }

    fn raw(loc: &str) -> RawRecord {
        RawRecord {
            loc: Some(loc.into()),
            ..RawRecord::default()
        }
    }

    fn check(record: RawRecord) -> Result<Record, Vec<FieldError>> {
        let sites = sites();
        Validator::new(&sites, "default", "", NOW).validate(&record)
    }

    fn rejected(record: RawRecord, field: &str, broken: impl Fn(&Rule) -> bool) {
        let errors = check(record.clone()).expect_err(&format!("{record:?} is refused"));
        assert!(
            errors.iter().any(|e| e.field == field && broken(&e.rule)),
            "{record:?}: {errors:?}"
        );
    }

    proptest::proptest! {
        /// Whenever the shortcut takes a loc, the full parse agrees with it:
        /// the same normal form, valid, under the site.
        #[test]
        fn the_plain_loc_shortcut_agrees_with_the_parser(
            rest in "[a-zA-Z0-9./%?#'\\\\ |\\[\\]{}<>^`\"_~!$&()*+,;=:@-]{0,24}",
            hex in "(%[0-9a-fA-F]{2}|%2[eE]|/?\\.\\.?[/?]?){0,3}",
        ) {
            let sites = sites();
            for site in &sites {
                for loc in [format!("{}{rest}{hex}", site.base_url), format!("{}{hex}{rest}", site.base_url)] {
                    if is_plainly_normal_under(&loc, site) {
                        proptest::prop_assert_eq!(parse_loc(&loc, Some(site)), Ok(loc.clone()));
                    }
                }
            }
        }
    }

    #[test]
    fn the_plain_loc_shortcut_takes_the_usual_locs_and_leaves_the_rest() {
        let sites = sites();
        let shop = &sites[0];
        for usual in [
            "https://www.example.com/shop/",
            "https://www.example.com/shop/a/b-c_d.html?x=1&y=%C3%A9",
        ] {
            assert!(is_plainly_normal_under(usual, shop), "{usual}");
        }
        for unusual in [
            "https://www.example.com/shop",
            "https://www.example.com/shop/a/../b",
            "https://www.example.com/shop/a/%2e%2E/b",
            "https://www.example.com/shop/.",
            "https://www.example.com/shop/a b",
            "https://www.example.com/shop/a#b",
            "https://www.example.com/shop/a\\b",
            "https://www.example.com/shop/50%-off",
            "https://www.example.com/shop/caf\u{e9}",
            "HTTPS://www.example.com/shop/a",
            "https://www.example.com:443/shop/a",
        ] {
            assert!(!is_plainly_normal_under(unusual, shop), "{unusual}");
        }
    }

    #[test]
    fn loc_rules() {
        rejected(RawRecord::default(), "loc", |rule| *rule == Rule::Required);
        rejected(raw("www.example.com/shop/x"), "loc", |rule| {
            matches!(rule, Rule::AbsoluteUrl { .. })
        });
        rejected(raw("ftp://www.example.com/shop/x"), "loc", |rule| {
            *rule == Rule::WebUrl("an http:// or https:// URL")
        });
        rejected(raw("https://www.example.com/shop/a b"), "loc", |rule| {
            matches!(rule, Rule::NoWhitespace { character: ' ', .. })
        });
        rejected(raw("https://www.example.com/shop/a\u{7}"), "loc", |rule| {
            matches!(
                rule,
                Rule::NoWhitespace {
                    character: '\u{7}',
                    ..
                }
            )
        });
        rejected(
            raw("https://user:pw@www.example.com/shop/x"),
            "loc",
            |rule| *rule == Rule::WebUrl("a URL without credentials"),
        );
        rejected(raw("https://www.example.com/shop/x#top"), "loc", |rule| {
            *rule == Rule::NoFragment
        });
        rejected(
            raw("https://www.example.com/shop/50%-off"),
            "loc",
            |rule| matches!(rule, Rule::ValidUri { problem, .. } if problem.contains("'%' not followed by two hex digits")),
        );
        rejected(
            raw("https://www.example.com/shop/a[1]"),
            "loc",
            |rule| matches!(rule, Rule::ValidUri { problem, .. } if problem.contains("'[' or ']' outside the host")),
        );
        rejected(raw("https://other.example.com/shop/x"), "loc", |rule| {
            matches!(rule, Rule::UnderBaseUrl { .. })
        });
        rejected(raw("http://www.example.com/shop/x"), "loc", |rule| {
            matches!(rule, Rule::UnderBaseUrl { .. })
        });
        rejected(raw("https://www.example.com/x"), "loc", |rule| {
            matches!(rule, Rule::UnderBaseUrl { .. })
        });
        rejected(
            raw("https://www.example.com/shop/../admin"),
            "loc",
            |rule| matches!(rule, Rule::UnderBaseUrl { .. }),
        );
        rejected(raw("https://www.example.com:8443/shop/x"), "loc", |rule| {
            matches!(rule, Rule::UnderBaseUrl { .. })
        });
        let long = format!("https://www.example.com/shop/{}", "a".repeat(2048));
        rejected(raw(&long), "loc", |rule| *rule == Rule::LocLength);

        let edge = format!("https://www.example.com/shop/{}", "a".repeat(2048 - 29));
        assert_eq!(check(raw(&edge)).expect("exactly 2,048").loc.len(), 2048);
        for (given, stored) in [
            (
                "HTTPS://WWW.Example.COM:443/shop/Caf\u{e9}?q=\u{fc}&x=%41",
                "https://www.example.com/shop/Caf%C3%A9?q=%C3%BC&x=%41",
            ),
            (
                "https://www.example.com/shop/a/./b/../c",
                "https://www.example.com/shop/a/c",
            ),
            (
                "https://www.example.com/shop/",
                "https://www.example.com/shop/",
            ),
            (
                "https://www.example.com/shop/a&b<c>\"'",
                "https://www.example.com/shop/a&b%3Cc%3E%22'",
            ),
        ] {
            assert_eq!(check(raw(given)).expect(given).loc, stored);
        }
    }

    #[test]
    fn lastmod_rules() {
        let at = |value: &str| {
            check(RawRecord {
                lastmod: Some(value.into()),
                ..raw("https://www.example.com/shop/x")
            })
        };
        for (given, parsed) in [
            ("2026", datetime!(2026-01-01 00:00 UTC)),
            ("2026-03", datetime!(2026-03-01 00:00 UTC)),
            ("2026-03-04", datetime!(2026-03-04 00:00 UTC)),
            ("2026-03-04T05:06Z", datetime!(2026-03-04 05:06 UTC)),
            (
                "2026-03-04T05:06:07+02:00",
                datetime!(2026-03-04 03:06:07 UTC),
            ),
            (
                "2026-03-04T05:06:07.25-01:30",
                datetime!(2026-03-04 06:36:07.25 UTC),
            ),
            ("2026-11-21T12:04:59Z", datetime!(2026-11-21 12:04:59 UTC)),
            (
                "2026-03-04T05:06:07.123456789Z",
                datetime!(2026-03-04 05:06:07.123456789 UTC),
            ),
            // Past nanoseconds, digits are dropped, not rounded.
            (
                "2026-03-04T05:06:07.0000000019Z",
                datetime!(2026-03-04 05:06:07.000000001 UTC),
            ),
        ] {
            assert_eq!(at(given).expect(given).lastmod, Some(parsed), "{given}");
        }
        for bad in [
            "26-03-04",
            "2026-3-4",
            "2026-02-30",
            "2026-03-04T05:06",
            "2026-03-04 05:06:07Z",
            "2026-03-04T25:00Z",
            "2026-03-04T05:06:07.Z",
            "2026-03T05:06Z",
            "yesterday",
            "",
        ] {
            let errors = at(bad).expect_err(bad);
            assert_eq!(errors[0].field, "lastmod", "{bad}");
            assert_eq!(errors[0].rule, Rule::W3cDatetime, "{bad}: {errors:?}");
        }
        let errors = at("2026-11-21T12:06Z").expect_err("future");
        assert!(
            matches!(errors[0].rule, Rule::NotInFuture { .. }),
            "{errors:?}"
        );
    }

    #[test]
    fn changefreq_priority_section_and_site_rules() {
        fn with(f: impl FnOnce(&mut RawRecord)) -> RawRecord {
            let mut record = raw("https://www.example.com/shop/x");
            f(&mut record);
            record
        }
        assert_eq!(
            check(with(|r| r.changefreq = Some("Weekly".into())))
                .expect("case")
                .changefreq,
            Some("weekly")
        );
        rejected(
            with(|r| r.changefreq = Some("sometimes".into())),
            "changefreq",
            |rule| *rule == Rule::OneOf(&CHANGEFREQS),
        );
        assert_eq!(
            check(with(|r| r.priority = Some("1".into())))
                .expect("1")
                .priority,
            Some(1.0)
        );
        assert_eq!(
            check(with(|r| r.priority = Some("0.0".into())))
                .expect("0")
                .priority,
            Some(0.0)
        );
        for bad in ["1.01", "-0.1", "NaN", "high", ""] {
            rejected(
                with(|r| r.priority = Some(bad.into())),
                "priority",
                |rule| {
                    *rule
                        == Rule::NumberFrom {
                            from: "0.0",
                            to: "1.0",
                        }
                },
            );
        }
        assert_eq!(
            check(with(|r| r.section = Some("news-de_2".into())))
                .expect("slug")
                .section,
            "news-de_2"
        );
        rejected(
            with(|r| r.section = Some("News".into())),
            "section",
            |rule| *rule == Rule::Slug,
        );
        rejected(
            with(|r| r.section = Some("a/b".into())),
            "section",
            |rule| *rule == Rule::Slug,
        );
        let blog = check(RawRecord {
            site: Some("blog".into()),
            ..raw("https://blog.example.org/post")
        })
        .expect("another configured site");
        assert_eq!(blog.site, "blog");
        rejected(with(|r| r.site = Some("nope".into())), "site", |rule| {
            *rule
                == Rule::ConfiguredSite {
                    known: vec!["default".into(), "blog".into()],
                }
        });
    }

    #[test]
    fn every_broken_rule_is_reported_with_a_short_value() {
        let errors = check(RawRecord {
            loc: Some(format!("ftp://{}", "x".repeat(500))),
            lastmod: Some("soon".into()),
            changefreq: Some("rarely".into()),
            priority: Some("2".into()),
            section: Some("Bad".into()),
            ..RawRecord::default()
        })
        .expect_err("all wrong");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["section", "loc", "lastmod", "changefreq", "priority"]
        );
        assert!(
            errors[1].value.chars().count() <= QUOTE_CHARS + 1 && errors[1].value.ends_with('…')
        );
    }

    #[test]
    fn tenths_are_written_as_floats_write_them() {
        for bits in (0..=1.0f32.to_bits())
            .step_by(997)
            .chain([(-0.0f32).to_bits()])
        {
            let value = f32::from_bits(bits);
            if let Some(text) = tenth_f32(value) {
                assert_eq!(text, value.to_string(), "{bits:#x}");
            }
            if let Some(text) = tenth_f64(f64::from(value)) {
                assert_eq!(text, f64::from(value).to_string(), "{bits:#x}");
            }
        }
        for tenths in 0..=10u8 {
            let (single, double) = (f32::from(tenths) / 10.0, f64::from(tenths) / 10.0);
            assert_eq!(tenth_f32(single), Some(single.to_string().as_str()));
            assert_eq!(tenth_f64(double), Some(double.to_string().as_str()));
        }
        assert_eq!(tenth_f32(0.25), None);
        assert_eq!(tenth_f64(-0.0), None);
        assert_eq!(tenth_f64(1.1), None);
    }

    #[test]
    fn json_priority_may_be_a_number() {
        let record: RawRecord =
            serde_json::from_str(r#"{"loc": "https://www.example.com/shop/x", "priority": 0.5}"#)
                .expect("JSON");
        assert_eq!(record.priority.as_deref(), Some("0.5"));
        let unknown =
            serde_json::from_str::<RawRecord>(r#"{"loc": "x", "prio": 1}"#).expect_err("typo");
        assert!(unknown.to_string().contains("prio"), "{unknown}");
    }
}
