//! Google's sitemap extensions as stored and as written: images, videos,
//! news, and hreflang alternates (`xhtml:link`).
//!
//! The types are the JSON the schema stores in `sitemap_urls` (and the
//! import and API fields), already valid: the schema's CHECKs and
//! [`crate::ingest::validate`] refuse the rest. Writing escapes every text and
//! percent-encodes URLs as `<loc>` is; the elements Google deprecated in 2022
//! have no field here, so they can never be written.

use serde::{Deserialize, Serialize};

use super::writer::{SkipReason, write_loc, write_text};

pub(crate) const IMAGE_NAMESPACE: &str = "http://www.google.com/schemas/sitemap-image/1.1";
pub(crate) const VIDEO_NAMESPACE: &str = "http://www.google.com/schemas/sitemap-video/1.1";
pub(crate) const NEWS_NAMESPACE: &str = "http://www.google.com/schemas/sitemap-news/0.9";
pub(crate) const XHTML_NAMESPACE: &str = "http://www.w3.org/1999/xhtml";

/// At most this many images per URL (Google).
pub(crate) const MAX_IMAGES: usize = 1000;

/// At most this many tags per video (Google).
pub(crate) const MAX_VIDEO_TAGS: usize = 32;

/// One `<image:image>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Image {
    pub(crate) loc: String,
}

/// Whether a restriction or platform list is the allowed set or the denied one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Relationship {
    Allow,
    Deny,
}

impl Relationship {
    fn as_str(self) -> &'static str {
        match self {
            Relationship::Allow => "allow",
            Relationship::Deny => "deny",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Restriction {
    pub(crate) relationship: Relationship,
    pub(crate) countries: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Platform {
    pub(crate) relationship: Relationship,
    pub(crate) platforms: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Uploader {
    pub(crate) name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) info: Option<String>,
}

/// One `<video:video>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Video {
    pub(crate) thumbnail_loc: String,
    pub(crate) title: String,
    pub(crate) description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content_loc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) player_loc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) duration: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expiration_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rating: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) view_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) publication_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) family_friendly: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) restriction: Option<Restriction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) requires_subscription: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) uploader: Option<Uploader>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) live: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
}

/// A Google News article.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct News {
    pub(crate) publication_name: String,
    pub(crate) language: String,
    pub(crate) publication_date: String,
    pub(crate) title: String,
}

/// One hreflang alternate of a URL, as import and the API take it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub(crate) struct Alternate {
    pub(crate) hreflang: String,
    pub(crate) href: String,
}

/// The namespaces a document declares on its root, beyond the sitemap's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Namespaces {
    pub(crate) xhtml: bool,
    pub(crate) image: bool,
    pub(crate) video: bool,
    pub(crate) news: bool,
}

impl Namespaces {
    /// The declarations, each with its leading space.
    pub(crate) fn write(self, out: &mut Vec<u8>) {
        for (used, prefix, uri) in [
            (self.xhtml, "xhtml", XHTML_NAMESPACE),
            (self.image, "image", IMAGE_NAMESPACE),
            (self.video, "video", VIDEO_NAMESPACE),
            (self.news, "news", NEWS_NAMESPACE),
        ] {
            if used {
                out.extend_from_slice(b" xmlns:");
                out.extend_from_slice(prefix.as_bytes());
                out.extend_from_slice(b"=\"");
                out.extend_from_slice(uri.as_bytes());
                out.push(b'"');
            }
        }
    }
}

/// A URL's cluster as served: `hreflangs[i]` names `hrefs[i]`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Alternates<'a> {
    pub(crate) hreflangs: &'a [String],
    pub(crate) hrefs: &'a [String],
}

/// What an entry carries besides the protocol's four elements.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extensions<'a> {
    pub(crate) alternates: Alternates<'a>,
    pub(crate) images: &'a [Image],
    pub(crate) videos: &'a [Video],
    /// Only in a news sitemap.
    pub(crate) news: Option<&'a News>,
    /// The most bytes the whole entry may take: what its page reserved for
    /// it. An entry whose extensions changed since (and would not fit) is
    /// written without them until the next fold makes room.
    pub(crate) budget: Option<usize>,
}

impl Extensions<'_> {
    pub(crate) fn is_empty(&self) -> bool {
        self.alternates.hrefs.is_empty()
            && self.images.is_empty()
            && self.videos.is_empty()
            && self.news.is_none()
    }

    /// Writes the extension elements the document declared namespaces for.
    pub(super) fn write(&self, out: &mut Vec<u8>, declared: Namespaces) -> Result<(), SkipReason> {
        if declared.xhtml {
            for (hreflang, href) in self.alternates.hreflangs.iter().zip(self.alternates.hrefs) {
                out.extend_from_slice(b"<xhtml:link rel=\"alternate\" hreflang=\"");
                write_text(out, hreflang)?;
                out.extend_from_slice(b"\" href=\"");
                write_loc(out, href)?;
                out.extend_from_slice(b"\"/>");
            }
        }
        if declared.image {
            for image in self.images {
                out.extend_from_slice(b"<image:image><image:loc>");
                write_loc(out, &image.loc)?;
                out.extend_from_slice(b"</image:loc></image:image>");
            }
        }
        if declared.video {
            for video in self.videos {
                write_video(out, video)?;
            }
        }
        if let (true, Some(news)) = (declared.news, self.news) {
            write_news(out, news)?;
        }
        Ok(())
    }
}

/// One video, its elements in the order of Google's video schema.
fn write_video(out: &mut Vec<u8>, video: &Video) -> Result<(), SkipReason> {
    out.extend_from_slice(b"<video:video>");
    element(out, "thumbnail_loc", |out| {
        write_loc(out, &video.thumbnail_loc)
    })?;
    element(out, "title", |out| write_text(out, &video.title))?;
    element(out, "description", |out| {
        write_text(out, &video.description)
    })?;
    if let Some(loc) = &video.content_loc {
        element(out, "content_loc", |out| write_loc(out, loc))?;
    }
    if let Some(loc) = &video.player_loc {
        element(out, "player_loc", |out| write_loc(out, loc))?;
    }
    if let Some(duration) = video.duration {
        element(out, "duration", |out| {
            out.extend_from_slice(duration.to_string().as_bytes());
            Ok(())
        })?;
    }
    if let Some(date) = &video.expiration_date {
        element(out, "expiration_date", |out| write_text(out, date))?;
    }
    if let Some(rating) = video.rating {
        element(out, "rating", |out| {
            super::writer::write_decimal(out, rating);
            Ok(())
        })?;
    }
    if let Some(count) = video.view_count {
        element(out, "view_count", |out| {
            out.extend_from_slice(count.to_string().as_bytes());
            Ok(())
        })?;
    }
    if let Some(date) = &video.publication_date {
        element(out, "publication_date", |out| write_text(out, date))?;
    }
    for tag in &video.tags {
        element(out, "tag", |out| write_text(out, tag))?;
    }
    if let Some(yes) = video.family_friendly {
        element(out, "family_friendly", |out| yes_no(out, yes))?;
    }
    if let Some(restriction) = &video.restriction {
        listed(
            out,
            "restriction",
            restriction.relationship,
            &restriction.countries,
        )?;
    }
    if let Some(yes) = video.requires_subscription {
        element(out, "requires_subscription", |out| yes_no(out, yes))?;
    }
    if let Some(uploader) = &video.uploader {
        out.extend_from_slice(b"<video:uploader");
        if let Some(info) = &uploader.info {
            out.extend_from_slice(b" info=\"");
            write_loc(out, info)?;
            out.push(b'"');
        }
        out.push(b'>');
        write_text(out, &uploader.name)?;
        out.extend_from_slice(b"</video:uploader>");
    }
    if let Some(platform) = &video.platform {
        listed(out, "platform", platform.relationship, &platform.platforms)?;
    }
    if let Some(yes) = video.live {
        element(out, "live", |out| yes_no(out, yes))?;
    }
    out.extend_from_slice(b"</video:video>");
    Ok(())
}

fn element(
    out: &mut Vec<u8>,
    name: &str,
    content: impl FnOnce(&mut Vec<u8>) -> Result<(), SkipReason>,
) -> Result<(), SkipReason> {
    out.extend_from_slice(b"<video:");
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
    content(out)?;
    out.extend_from_slice(b"</video:");
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
    Ok(())
}

/// A space-separated list with its relationship attribute.
fn listed(
    out: &mut Vec<u8>,
    name: &str,
    relationship: Relationship,
    items: &[String],
) -> Result<(), SkipReason> {
    out.extend_from_slice(b"<video:");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b" relationship=\"");
    out.extend_from_slice(relationship.as_str().as_bytes());
    out.extend_from_slice(b"\">");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        write_text(out, item)?;
    }
    out.extend_from_slice(b"</video:");
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
    Ok(())
}

fn yes_no(out: &mut Vec<u8>, yes: bool) -> Result<(), SkipReason> {
    out.extend_from_slice(if yes { b"yes" } else { b"no" });
    Ok(())
}

/// Writes one article's `<news:news>` (inside its `<url>`).
fn write_news(out: &mut Vec<u8>, news: &News) -> Result<(), SkipReason> {
    out.extend_from_slice(b"<news:news><news:publication><news:name>");
    write_text(out, &news.publication_name)?;
    out.extend_from_slice(b"</news:name><news:language>");
    write_text(out, &news.language)?;
    out.extend_from_slice(b"</news:language></news:publication><news:publication_date>");
    write_text(out, &news.publication_date)?;
    out.extend_from_slice(b"</news:publication_date><news:title>");
    write_text(out, &news.title)?;
    out.extend_from_slice(b"</news:title></news:news>");
    Ok(())
}
