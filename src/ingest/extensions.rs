//! The rules of the extension fields (`alternates`, `images`, `videos`,
//! `news`), as import and the write API apply them: the schema's CHECKs
//! word for word (a test holds the two to the same cases), so a record is
//! refused here with every broken rule named rather than by the database
//! with the first.
//!
//! URLs are normalised as `loc` is; dates become XML Schema dates or
//! dateTimes (what crawlers validate the extensions against).

use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

use super::rule::Rule;
use super::validate::{CLOCK_SKEW, FieldError, check_loc, field_error, parse_w3c_datetime};
use crate::sitemap::codes;
use crate::sitemap::extensions::{
    Image, MAX_IMAGES, MAX_VIDEO_TAGS, News, Platform, Relationship, Restriction, Uploader, Video,
};

/// Image keys Google deprecated in 2022.
pub(crate) const DEPRECATED_IMAGE_KEYS: [&str; 4] = ["caption", "geo_location", "title", "license"];

/// Video keys Google deprecated in 2022 (`allow_embed` and `autoplay` were
/// attributes of `player_loc`).
pub(crate) const DEPRECATED_VIDEO_KEYS: [&str; 6] = [
    "category",
    "gallery_loc",
    "price",
    "tvshow",
    "allow_embed",
    "autoplay",
];

/// A video's fields, in Google's names (its elements', but `tag` for each
/// of `tags`).
pub(crate) const VIDEO_KEYS: [&str; 17] = [
    "thumbnail_loc",
    "title",
    "description",
    "content_loc",
    "player_loc",
    "duration",
    "expiration_date",
    "rating",
    "view_count",
    "publication_date",
    "family_friendly",
    "restriction",
    "platform",
    "requires_subscription",
    "uploader",
    "live",
    "tags",
];

/// The longest title, description or publication name, in characters.
const MAX_TEXT_CHARS: usize = 2048;
const MAX_TAG_CHARS: usize = 256;
const MAX_UPLOADER_CHARS: usize = 255;

/// A record's place in hreflang clusters: the hreflang values of its own
/// loc, and the cluster named by the set it lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Membership {
    pub(crate) hreflang: Vec<String>,
    /// The smallest href of the set: every member that lists the same set
    /// names the same cluster.
    pub(crate) cluster: String,
}

/// Checks the extension fields of one record whose (normalised) loc is
/// `loc`, collecting every broken rule in `errors`.
pub(crate) struct Checker<'a> {
    pub(crate) loc: &'a str,
    pub(crate) now: OffsetDateTime,
    pub(crate) errors: &'a mut Vec<FieldError>,
    /// Whether a URL lies under a site sitemapd serves: where every member
    /// a record names must be written too.
    pub(crate) served: &'a dyn Fn(&str) -> bool,
}

impl Checker<'_> {
    fn refuse(&mut self, field: String, value: &str, rule: Rule) {
        self.errors.push(field_error(field, value, rule));
    }

    pub(crate) fn images(&mut self, value: &Value) -> Option<Vec<Image>> {
        let Some(items) = value.as_array() else {
            self.refuse(
                "images".into(),
                &value.to_string(),
                Rule::JsonArrayOf(r#"{"loc": URL}"#),
            );
            return None;
        };
        if items.len() > MAX_IMAGES {
            self.refuse(
                "images".into(),
                &format!("{} images", items.len()),
                Rule::AtMostImages,
            );
            return None;
        }
        let before = self.errors.len();
        let images: Vec<Image> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let field = format!("images[{i}]");
                let object = self.object(&field, item, &["loc"], &DEPRECATED_IMAGE_KEYS)?;
                let loc = self.url(format!("{field}.loc"), object.get("loc"))?;
                Some(Image { loc })
            })
            .collect();
        (self.errors.len() == before).then_some(images)
    }

    pub(crate) fn videos(&mut self, value: &Value) -> Option<Vec<Video>> {
        let Some(items) = value.as_array() else {
            self.refuse(
                "videos".into(),
                &value.to_string(),
                Rule::JsonArrayOf("video objects"),
            );
            return None;
        };
        let before = self.errors.len();
        let videos: Vec<Video> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.video(&format!("videos[{i}]"), item))
            .collect();
        (self.errors.len() == before).then_some(videos)
    }

    fn video(&mut self, field: &str, value: &Value) -> Option<Video> {
        let object = self.object(field, value, &VIDEO_KEYS, &DEPRECATED_VIDEO_KEYS)?;
        let before = self.errors.len();
        let thumbnail_loc = self.url(
            format!("{field}.thumbnail_loc"),
            object.get("thumbnail_loc"),
        );
        let title = self.text(
            format!("{field}.title"),
            object.get("title"),
            MAX_TEXT_CHARS,
        );
        let description = self.text(
            format!("{field}.description"),
            object.get("description"),
            MAX_TEXT_CHARS,
        );
        if !object.contains_key("content_loc") && !object.contains_key("player_loc") {
            self.refuse(format!("{field}.content_loc"), "", Rule::ContentOrPlayerLoc);
        }
        let media_loc = |checker: &mut Self, key: &str| {
            let value = object.get(key)?;
            let url = checker.url(format!("{field}.{key}"), Some(value))?;
            if url == checker.loc {
                checker.refuse(format!("{field}.{key}"), &url, Rule::NotThePagesOwnLoc);
                return None;
            }
            Some(url)
        };
        let content_loc = media_loc(self, "content_loc");
        let player_loc = media_loc(self, "player_loc");
        let duration = object.get("duration").and_then(|v| {
            let seconds = v.as_u64().filter(|s| (1..=28_800).contains(s));
            if seconds.is_none() {
                self.refuse(
                    format!("{field}.duration"),
                    &v.to_string(),
                    Rule::DurationSeconds,
                );
            }
            seconds.and_then(|s| u32::try_from(s).ok())
        });
        let expiration_date = object
            .get("expiration_date")
            .and_then(|v| self.datetime(format!("{field}.expiration_date"), v));
        let rating = object.get("rating").and_then(|v| {
            let rating = v.as_f64().filter(|r| (0.0..=5.0).contains(r));
            if rating.is_none() {
                self.refuse(
                    format!("{field}.rating"),
                    &v.to_string(),
                    Rule::NumberFrom {
                        from: "0.0",
                        to: "5.0",
                    },
                );
            }
            rating
        });
        let view_count = object.get("view_count").and_then(|v| {
            let count = v.as_u64();
            if count.is_none() {
                self.refuse(
                    format!("{field}.view_count"),
                    &v.to_string(),
                    Rule::WholeNumber,
                );
            }
            count
        });
        let publication_date = object
            .get("publication_date")
            .and_then(|v| self.datetime(format!("{field}.publication_date"), v));
        let flag = |checker: &mut Self, key: &str| {
            let value = object.get(key)?;
            let flag = value.as_bool();
            if flag.is_none() {
                checker.refuse(format!("{field}.{key}"), &value.to_string(), Rule::Boolean);
            }
            flag
        };
        let family_friendly = flag(self, "family_friendly");
        let requires_subscription = flag(self, "requires_subscription");
        let live = flag(self, "live");
        let restriction = object.get("restriction").and_then(|v| {
            let (relationship, countries) = self.listed(
                &format!("{field}.restriction"),
                v,
                "countries",
                Rule::Country,
                codes::is_country,
            )?;
            Some(Restriction {
                relationship,
                countries,
            })
        });
        let platform = object.get("platform").and_then(|v| {
            let (relationship, platforms) = self.listed(
                &format!("{field}.platform"),
                v,
                "platforms",
                Rule::Platform,
                |p| matches!(p, "web" | "mobile" | "tv"),
            )?;
            Some(Platform {
                relationship,
                platforms,
            })
        });
        let uploader = object
            .get("uploader")
            .and_then(|v| self.uploader(&format!("{field}.uploader"), v));
        let tags = object.get("tags").and_then(|v| {
            let Some(items) = v.as_array() else {
                self.refuse(
                    format!("{field}.tags"),
                    &v.to_string(),
                    Rule::ArrayOf(Box::new(Rule::NonEmptyString)),
                );
                return None;
            };
            if items.len() > MAX_VIDEO_TAGS {
                self.refuse(
                    format!("{field}.tags"),
                    &format!("{} tags", items.len()),
                    Rule::AtMostTags,
                );
                return None;
            }
            items
                .iter()
                .enumerate()
                .map(|(i, tag)| self.text(format!("{field}.tags[{i}]"), Some(tag), MAX_TAG_CHARS))
                .collect::<Option<Vec<_>>>()
        });
        if self.errors.len() != before {
            return None;
        }
        Some(Video {
            thumbnail_loc: thumbnail_loc?,
            title: title?,
            description: description?,
            content_loc,
            player_loc,
            duration,
            expiration_date,
            rating,
            view_count,
            publication_date,
            family_friendly,
            restriction,
            platform,
            requires_subscription,
            uploader,
            live,
            tags: tags.unwrap_or_default(),
        })
    }

    fn uploader(&mut self, field: &str, value: &Value) -> Option<Uploader> {
        let object = self.object(field, value, &["name", "info"], &[])?;
        let name = self.text(
            format!("{field}.name"),
            object.get("name"),
            MAX_UPLOADER_CHARS,
        );
        let info = object.get("info").and_then(|info| {
            let url = self.url(format!("{field}.info"), Some(info))?;
            let host = |u: &str| {
                Url::parse(u)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned))
            };
            if host(&url) != host(self.loc) {
                self.refuse(format!("{field}.info"), &url, Rule::OnTheLocsHost);
                return None;
            }
            Some(url)
        });
        if object.contains_key("info") && info.is_none() {
            return None;
        }
        Some(Uploader { name: name?, info })
    }

    /// `{"relationship": "allow"|"deny", list_key: [...]}`.
    fn listed(
        &mut self,
        field: &str,
        value: &Value,
        list_key: &str,
        item_rule: Rule,
        valid: impl Fn(&str) -> bool,
    ) -> Option<(Relationship, Vec<String>)> {
        let object = self.object(field, value, &["relationship", list_key], &[])?;
        let relationship = match object.get("relationship").and_then(Value::as_str) {
            Some("allow") => Some(Relationship::Allow),
            Some("deny") => Some(Relationship::Deny),
            other => {
                self.refuse(
                    format!("{field}.relationship"),
                    other.unwrap_or_default(),
                    Rule::AllowOrDeny,
                );
                None
            }
        };
        let Some(items) = object.get(list_key).and_then(Value::as_array) else {
            self.refuse(
                format!("{field}.{list_key}"),
                &object
                    .get(list_key)
                    .map(Value::to_string)
                    .unwrap_or_default(),
                Rule::ArrayOf(Box::new(item_rule)),
            );
            return None;
        };
        let mut list = Vec::with_capacity(items.len());
        for item in items {
            match item.as_str().filter(|s| valid(s)) {
                Some(s) => list.push(s.to_owned()),
                None => {
                    self.refuse(format!("{field}.{list_key}"), &item.to_string(), item_rule);
                    return None;
                }
            }
        }
        Some((relationship?, list))
    }

    pub(crate) fn news(&mut self, value: &Value) -> Option<News> {
        let object = self.object(
            "news",
            value,
            &["publication_name", "language", "publication_date", "title"],
            &[],
        )?;
        let publication_name = self.text(
            "news.publication_name".into(),
            object.get("publication_name"),
            MAX_TEXT_CHARS,
        );
        let language = match object.get("language") {
            None => {
                self.refuse("news.language".into(), "", Rule::Required);
                None
            }
            Some(v) => {
                let language = v.as_str().filter(|l| codes::is_news_language(l));
                if language.is_none() {
                    self.refuse(
                        "news.language".into(),
                        v.as_str().unwrap_or(&v.to_string()),
                        Rule::NewsLanguage,
                    );
                }
                language.map(str::to_owned)
            }
        };
        let publication_date = match object.get("publication_date") {
            None => {
                self.refuse("news.publication_date".into(), "", Rule::Required);
                None
            }
            Some(v) => self
                .datetime("news.publication_date".into(), v)
                .filter(|date| {
                    let future =
                        parse_w3c_datetime(date).is_some_and(|at| at > self.now + CLOCK_SKEW);
                    if future {
                        self.refuse(
                            "news.publication_date".into(),
                            date,
                            Rule::NotInFutureFirstPublication,
                        );
                    }
                    !future
                }),
        };
        let title = self.text("news.title".into(), object.get("title"), MAX_TEXT_CHARS);
        Some(News {
            publication_name: publication_name?,
            language: language?,
            publication_date: publication_date?,
            title: title?,
        })
    }

    /// `[{"hreflang": …, "href": …}]`, which must list the record's own loc.
    pub(crate) fn alternates(&mut self, value: &Value) -> Option<Option<Membership>> {
        let Some(items) = value.as_array() else {
            self.refuse(
                "alternates".into(),
                &value.to_string(),
                Rule::JsonArrayOf(r#"{"hreflang": …, "href": URL}"#),
            );
            return None;
        };
        if items.is_empty() {
            return Some(None);
        }
        let before = self.errors.len();
        let mut links: Vec<(String, String)> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let field = format!("alternates[{i}]");
            let Some(object) = self.object(&field, item, &["hreflang", "href"], &[]) else {
                continue;
            };
            let hreflang = match object.get("hreflang").and_then(Value::as_str) {
                Some(code) if codes::is_hreflang(code) => Some(code.to_owned()),
                other => {
                    self.refuse(
                        format!("{field}.hreflang"),
                        other.unwrap_or_default(),
                        Rule::Hreflang,
                    );
                    None
                }
            };
            let href = self
                .url(format!("{field}.href"), object.get("href"))
                .filter(|href| {
                    let served = (self.served)(href);
                    if !served {
                        self.refuse(format!("{field}.href"), href, Rule::UnderAServedSite);
                    }
                    served
                });
            if let (Some(hreflang), Some(href)) = (hreflang, href) {
                if let Some((_, first)) = links
                    .iter()
                    .find(|(code, _)| code.eq_ignore_ascii_case(&hreflang))
                {
                    let rule = Rule::HreflangOnce {
                        first: first.clone(),
                    };
                    self.refuse(format!("{field}.hreflang"), &hreflang, rule);
                    continue;
                }
                links.push((hreflang, href));
            }
        }
        if self.errors.len() != before {
            return None;
        }
        let own: Vec<String> = links
            .iter()
            .filter(|(_, href)| href == self.loc)
            .map(|(code, _)| code.clone())
            .collect();
        if own.is_empty() {
            self.refuse("alternates".into(), self.loc, Rule::ListsItsOwnLoc);
            return None;
        }
        let cluster = links
            .iter()
            .map(|(_, href)| href)
            .min()
            .cloned()
            .unwrap_or_default();
        Some(Some(Membership {
            hreflang: own,
            cluster,
        }))
    }

    /// A JSON object whose keys are among `allowed`, naming the deprecated.
    fn object<'v>(
        &mut self,
        field: &str,
        value: &'v Value,
        allowed: &[&str],
        deprecated: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(object) = value.as_object() else {
            self.refuse(field.to_owned(), &value.to_string(), Rule::JsonObject);
            return None;
        };
        let before = self.errors.len();
        for (key, value) in object {
            let shown = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            if deprecated.contains(&key.as_str()) {
                self.refuse(format!("{field}.{key}"), &shown, Rule::Deprecated);
            } else if !allowed.contains(&key.as_str()) {
                let kind = field.split('[').next().unwrap_or(field);
                self.refuse(
                    format!("{field}.{key}"),
                    &shown,
                    Rule::NotAFieldOf {
                        kind: kind.to_owned(),
                        fields: allowed.iter().map(|&field| field.to_owned()).collect(),
                    },
                );
            }
        }
        (self.errors.len() == before).then_some(object)
    }

    /// A required absolute http(s) URL, normalised as `loc` is.
    fn url(&mut self, field: String, value: Option<&Value>) -> Option<String> {
        match value {
            None => {
                self.refuse(field, "", Rule::Required);
                None
            }
            Some(Value::String(url)) => check_loc(url, None)
                .map_err(|rule| self.refuse(field, url, rule))
                .ok(),
            Some(other) => {
                self.refuse(field, &other.to_string(), Rule::AbsoluteHttpUrl);
                None
            }
        }
    }

    /// A required non-empty text XML can carry, of at most `max_chars`.
    fn text(&mut self, field: String, value: Option<&Value>, max_chars: usize) -> Option<String> {
        let text = match value {
            None => {
                self.refuse(field, "", Rule::Required);
                return None;
            }
            Some(Value::String(text)) if !text.is_empty() => text,
            Some(other) => {
                let shown = other
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_owned);
                self.refuse(field, &shown, Rule::NonEmptyString);
                return None;
            }
        };
        if text.chars().count() > max_chars {
            self.refuse(field, text, Rule::AtMostChars(max_chars));
            return None;
        }
        if text.chars().any(|c| {
            matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}' | '\u{fffe}' | '\u{ffff}')
        }) {
            self.refuse(
                field,
                text,
                Rule::NoControlCharacters,
            );
            return None;
        }
        Some(text.clone())
    }

    /// A W3C datetime, stored as an XML Schema date or dateTime (UTC).
    fn datetime(&mut self, field: String, value: &Value) -> Option<String> {
        let text = value.as_str().unwrap_or_default();
        let Some(at) = parse_w3c_datetime(text) else {
            self.refuse(
                field,
                value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned)
                    .as_str(),
                Rule::W3cDateOrDateTime,
            );
            return None;
        };
        if text.contains('T') {
            at.format(&Rfc3339).ok()
        } else {
            Some(at.date().to_string())
        }
    }
}
