//! One `<url>` of an existing sitemap taken apart into a record, its image,
//! video, news and `xhtml:link` entries included, in the import's field
//! names and shapes.
//!
//! Values are carried as written (a duration that is not a number stays a
//! string), so the validator names what is wrong with them exactly as it
//! does for JSON Lines. What sitemapd never serves is dropped and counted,
//! never silently: the elements Google deprecated in 2022 (image `caption`,
//! `geo_location`, `title`, `license`; video `category`, `gallery_loc`,
//! `price`, `tvshow`, `player_loc`'s `allow_embed` and `autoplay`), and any
//! other element it does not know, each counted once with its descendants.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::extensions::VIDEO_KEYS;
use super::validate::RawRecord;
use crate::sitemap::extensions::{
    IMAGE_NAMESPACE, NEWS_NAMESPACE, VIDEO_NAMESPACE, XHTML_NAMESPACE,
};

/// Elements and attributes left out of an import, by qualified name
/// (`image:caption`, `video:player_loc@autoplay`), with how often.
pub(crate) type Dropped = BTreeMap<String, u64>;

/// Whose element: the sitemap protocol's (any namespace but the extensions',
/// as crawlers read it), or one of the extensions'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Namespace {
    Sitemap,
    Image,
    Video,
    News,
    Xhtml,
}

impl Namespace {
    pub(crate) fn of(uri: &str) -> Namespace {
        [
            (IMAGE_NAMESPACE, Namespace::Image),
            (VIDEO_NAMESPACE, Namespace::Video),
            (NEWS_NAMESPACE, Namespace::News),
            (XHTML_NAMESPACE, Namespace::Xhtml),
        ]
        .into_iter()
        .find(|(known, _)| *known == uri)
        .map_or(Namespace::Sitemap, |(_, namespace)| namespace)
    }

    fn prefix(self) -> &'static str {
        match self {
            Namespace::Sitemap => "",
            Namespace::Image => "image:",
            Namespace::Video => "video:",
            Namespace::News => "news:",
            Namespace::Xhtml => "xhtml:",
        }
    }
}

/// What an open element inside the `<url>` is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Open {
    /// A value: its text goes to this field when it closes.
    Field(Field),
    /// A container whose children are read (`image:image`, `video:video`,
    /// `news:news`, `news:publication`).
    Container,
    /// Dropped, with everything inside it.
    Ignored,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Loc,
    Lastmod,
    Changefreq,
    Priority,
    ImageLoc,
    /// A video element of this name, with the attribute it may carry.
    Video(&'static str, Option<String>),
    Tag,
    News(&'static str),
}

/// The attribute each attributed video element carries.
fn video_attribute(field: &str) -> Option<&'static str> {
    match field {
        "restriction" | "platform" => Some("relationship"),
        "uploader" => Some("info"),
        _ => None,
    }
}

/// Builds one record from the events inside one `<url>`.
#[derive(Debug, Default)]
pub(crate) struct EntryReader {
    record: RawRecord,
    images: Vec<Value>,
    videos: Vec<Map<String, Value>>,
    news: Option<Map<String, Value>>,
    alternates: Vec<Value>,
    /// The elements open below the `<url>`: what each is for, and its name.
    open: Vec<Open>,
    names: Vec<String>,
    text: String,
}

impl EntryReader {
    /// An element opened inside the `<url>`, with its attributes (by local
    /// name, values unescaped).
    pub(crate) fn start(
        &mut self,
        namespace: Namespace,
        name: &str,
        attributes: &[(String, String)],
        dropped: &mut Dropped,
    ) {
        self.text.clear();
        let parent = self.open.last().cloned();
        let open = match (parent, namespace) {
            (Some(Open::Ignored | Open::Field(_)), _) => Open::Ignored,
            (None, Namespace::Sitemap) => match name {
                "loc" => Open::Field(Field::Loc),
                "lastmod" => Open::Field(Field::Lastmod),
                "changefreq" => Open::Field(Field::Changefreq),
                "priority" => Open::Field(Field::Priority),
                _ => self.drop(namespace, name, dropped),
            },
            (None, Namespace::Image) if name == "image" => {
                self.images.push(json!({}));
                Open::Container
            }
            (None, Namespace::Video) if name == "video" => {
                self.videos.push(Map::new());
                Open::Container
            }
            (None, Namespace::News) if name == "news" => {
                self.news.get_or_insert_default();
                Open::Container
            }
            (None, Namespace::Xhtml) if name == "link" => {
                let value = |key: &str| {
                    attributes
                        .iter()
                        .find(|(name, _)| name == key)
                        .map(|(_, value)| value.clone())
                };
                if value("rel").as_deref() == Some("alternate") {
                    self.alternates.push(json!({
                        "hreflang": value("hreflang").unwrap_or_default(),
                        "href": value("href").unwrap_or_default(),
                    }));
                    Open::Container
                } else {
                    self.drop(namespace, name, dropped)
                }
            }
            (Some(Open::Container), Namespace::Image) if self.in_element("image") => match name {
                "loc" => Open::Field(Field::ImageLoc),
                _ => self.drop(namespace, name, dropped),
            },
            (Some(Open::Container), Namespace::Video) if self.in_element("video") => {
                match VIDEO_KEYS
                    .iter()
                    .find(|field| **field == name && **field != "tags")
                {
                    Some(field) => {
                        if *field == "player_loc" {
                            for deprecated in ["allow_embed", "autoplay"] {
                                if attributes.iter().any(|(name, _)| name == deprecated) {
                                    *dropped
                                        .entry(format!("video:player_loc@{deprecated}"))
                                        .or_default() += 1;
                                }
                            }
                        }
                        let attribute = video_attribute(field).and_then(|key| {
                            attributes
                                .iter()
                                .find(|(name, _)| name == key)
                                .map(|(_, value)| value.clone())
                        });
                        Open::Field(Field::Video(field, attribute))
                    }
                    None if name == "tag" => Open::Field(Field::Tag),
                    None => self.drop(namespace, name, dropped),
                }
            }
            (Some(Open::Container), Namespace::News) if self.in_element("news") => match name {
                "publication" => Open::Container,
                "publication_date" => Open::Field(Field::News("publication_date")),
                "title" => Open::Field(Field::News("title")),
                _ => self.drop(namespace, name, dropped),
            },
            (Some(Open::Container), Namespace::News) if self.in_element("publication") => {
                match name {
                    "name" => Open::Field(Field::News("publication_name")),
                    "language" => Open::Field(Field::News("language")),
                    _ => self.drop(namespace, name, dropped),
                }
            }
            _ => self.drop(namespace, name, dropped),
        };
        self.open.push(open);
        self.names.push(name.to_owned());
    }

    /// Text inside the current element.
    pub(crate) fn text(&mut self, text: &str) {
        if matches!(self.open.last(), Some(Open::Field(_))) {
            self.text.push_str(text);
        }
    }

    /// The current element closed.
    pub(crate) fn end(&mut self) {
        self.names.pop();
        let Some(Open::Field(field)) = self.open.pop() else {
            return;
        };
        let text = self.text.trim().to_owned();
        self.text.clear();
        match field {
            Field::Loc => self.record.loc = Some(text),
            Field::Lastmod => self.record.lastmod = Some(text),
            Field::Changefreq => self.record.changefreq = Some(text),
            Field::Priority => self.record.priority = Some(text),
            Field::ImageLoc => {
                if let Some(image) = self.images.last_mut() {
                    image["loc"] = Value::String(text);
                }
            }
            Field::Tag => {
                if let Some(video) = self.videos.last_mut() {
                    let tags = video.entry("tags").or_insert_with(|| json!([]));
                    if let Value::Array(tags) = tags {
                        tags.push(Value::String(text));
                    }
                }
            }
            Field::Video(name, attribute) => {
                if let Some(video) = self.videos.last_mut() {
                    video.insert(name.to_owned(), video_value(name, text, attribute));
                }
            }
            Field::News(name) => {
                if let Some(news) = self.news.as_mut() {
                    news.insert(name.to_owned(), Value::String(text));
                }
            }
        }
    }

    /// The record, its extensions as the import's fields.
    pub(crate) fn finish(self) -> RawRecord {
        let mut record = self.record;
        if !self.images.is_empty() {
            record.images = Some(Value::Array(self.images));
        }
        if !self.videos.is_empty() {
            record.videos = Some(Value::Array(
                self.videos.into_iter().map(Value::Object).collect(),
            ));
        }
        record.news = self.news.map(Value::Object);
        if !self.alternates.is_empty() {
            record.alternates = Some(Value::Array(self.alternates));
        }
        record
    }

    fn in_element(&self, name: &str) -> bool {
        self.names.last().is_some_and(|open| open == name)
    }

    fn drop(&self, namespace: Namespace, name: &str, dropped: &mut Dropped) -> Open {
        *dropped
            .entry(format!("{}{name}", namespace.prefix()))
            .or_default() += 1;
        Open::Ignored
    }
}

/// A video element's value in the import's shape: numbers and yes/no as
/// JSON numbers and booleans when they read as such (else the text, for the
/// validator to refuse by name), lists split on whitespace.
fn video_value(name: &str, text: String, attribute: Option<String>) -> Value {
    match name {
        "duration" | "view_count" => text.parse::<u64>().map_or(Value::String(text), Value::from),
        "rating" => text.parse::<f64>().map_or(Value::String(text), Value::from),
        "family_friendly" | "requires_subscription" | "live" => match text.as_str() {
            "yes" => Value::Bool(true),
            "no" => Value::Bool(false),
            _ => Value::String(text),
        },
        "restriction" | "platform" => {
            let key = if name == "restriction" {
                "countries"
            } else {
                "platforms"
            };
            let list: Vec<Value> = text
                .split_whitespace()
                .map(|item| Value::String(item.to_owned()))
                .collect();
            let mut value = json!({ key: list });
            if let Some(relationship) = attribute {
                value["relationship"] = Value::String(relationship);
            }
            value
        }
        "uploader" => {
            let mut value = json!({ "name": text });
            if let Some(info) = attribute {
                value["info"] = Value::String(info);
            }
            value
        }
        _ => Value::String(text),
    }
}
