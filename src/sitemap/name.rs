//! Sitemap file names: `sitemap-N.xml[.gz]` for the default section,
//! `sitemap-{section}-N.xml[.gz]` for named ones, and `sitemap_news.xml[.gz]`,
//! `sitemap_news-N.xml[.gz]` (N ≥ 2) for the news sitemaps. The underscore,
//! as in `sitemap_index`, keeps a section named `news` from colliding.
//!
//! Parsing is strict, so every name that does not denote exactly one page is
//! a 404 rather than a lookup: page numbers match `^[1-9][0-9]*$` and fit in
//! an `i32` (the schema's page column), sections are the schema's slugs.

use std::fmt;

/// How a page is sent: as a gzip file or as plain XML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `.xml.gz`: the body is a gzip file (`application/gzip`).
    Gzip,
    /// `.xml`: the body is the XML document itself.
    Plain,
}

impl Encoding {
    fn suffix(self) -> &'static str {
        match self {
            Encoding::Gzip => ".xml.gz",
            Encoding::Plain => ".xml",
        }
    }
}

/// The section the news sitemaps are kept under: not a slug, so no
/// section of rows can have it.
pub(crate) const NEWS_SECTION: &str = "_news";

/// The news sitemaps' file stem.
const NEWS_STEM: &str = "sitemap_news";

/// One page of one section: what a sitemap file name denotes. The news
/// sitemaps are the pages of [`NEWS_SECTION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageName {
    /// The section slug; empty for the default section.
    pub(crate) section: String,
    /// 1-based page number.
    pub page: i32,
}

impl PageName {
    /// Parses a request's file name, e.g. `sitemap-blog-3.xml.gz`.
    pub fn parse(file: &str) -> Option<(PageName, Encoding)> {
        if let Some(rest) = file.strip_prefix(NEWS_STEM) {
            return Self::parse_news(rest);
        }
        let rest = file.strip_prefix("sitemap-")?;
        let (stem, encoding) = if let Some(stem) = rest.strip_suffix(Encoding::Gzip.suffix()) {
            (stem, Encoding::Gzip)
        } else {
            (
                rest.strip_suffix(Encoding::Plain.suffix())?,
                Encoding::Plain,
            )
        };
        // By bytes: a `str` search for one character costs every request more.
        let (section, number) = match stem.bytes().rposition(|b| b == b'-') {
            Some(dash) if is_section_slug(&stem[..dash]) => (&stem[..dash], &stem[dash + 1..]),
            Some(_) => return None,
            None => ("", stem),
        };
        let page = parse_page_number(number)?;
        Some((
            PageName {
                section: section.to_owned(),
                page,
            },
            encoding,
        ))
    }

    /// `sitemap_news` followed by `rest`: `.xml.gz`, or `-N.xml.gz` with N ≥ 2
    /// (the first file has one name only).
    fn parse_news(rest: &str) -> Option<(PageName, Encoding)> {
        let (number, encoding) = if let Some(stem) = rest.strip_suffix(Encoding::Gzip.suffix()) {
            (stem, Encoding::Gzip)
        } else {
            (
                rest.strip_suffix(Encoding::Plain.suffix())?,
                Encoding::Plain,
            )
        };
        let page = match number {
            "" => 1,
            _ => parse_page_number(number.strip_prefix('-')?).filter(|&n| n >= 2)?,
        };
        Some((PageName::news(page), encoding))
    }

    /// The `page`-th news sitemap.
    pub(crate) fn news(page: i32) -> PageName {
        PageName {
            section: NEWS_SECTION.to_owned(),
            page,
        }
    }

    pub(crate) fn is_news(&self) -> bool {
        self.section == NEWS_SECTION
    }

    /// The file name of this page in the given encoding.
    pub fn file_name(&self, encoding: Encoding) -> String {
        format!("{self}{}", encoding.suffix())
    }
}

impl fmt::Display for PageName {
    /// The file name without its extension: `sitemap-3`, `sitemap-blog-3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_news() {
            match self.page {
                1 => f.write_str(NEWS_STEM),
                page => write!(f, "{NEWS_STEM}-{page}"),
            }
        } else if self.section.is_empty() {
            write!(f, "sitemap-{}", self.page)
        } else {
            write!(f, "sitemap-{}-{}", self.section, self.page)
        }
    }
}

/// A site's index file: the root, `sitemap_index.xml[.gz]`, or a numbered
/// part, `sitemap_index-N.xml[.gz]` (N ≥ 1, canonical digits only).
///
/// The root lists the first pages, and parts 2, 3, … the rest; or, with
/// `nested_index`, the root lists the parts 1, 2, … and they the pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexFile {
    Root,
    Part(usize),
}

impl IndexFile {
    /// Which index file a name denotes, and its encoding; `sitemap.xml`
    /// is the root too.
    pub fn parse(file: &str) -> Option<(IndexFile, Encoding)> {
        let (stem, encoding) = match file.strip_suffix(Encoding::Gzip.suffix()) {
            Some(stem) => (stem, Encoding::Gzip),
            None => (
                file.strip_suffix(Encoding::Plain.suffix())?,
                Encoding::Plain,
            ),
        };
        // `sitemap.xml` is the name people and tools try first.
        if stem == "sitemap_index" || stem == "sitemap" {
            return Some((IndexFile::Root, encoding));
        }
        let number = stem.strip_prefix("sitemap_index-")?;
        parse_page_number(number)
            .and_then(|n| usize::try_from(n).ok())
            .map(|part| (IndexFile::Part(part), encoding))
    }

    /// The file's name (see [`IndexFile::parse`]).
    pub fn file_name(self, encoding: Encoding) -> String {
        match self {
            IndexFile::Root => format!("sitemap_index{}", encoding.suffix()),
            IndexFile::Part(part) => format!("sitemap_index-{part}{}", encoding.suffix()),
        }
    }

    /// The file of the `chunk`-th run of pages (from 1) in an index that
    /// lists pages directly: the root, then parts 2, 3, ….
    pub(crate) fn of_chunk(chunk: usize) -> IndexFile {
        if chunk <= 1 {
            IndexFile::Root
        } else {
            IndexFile::Part(chunk)
        }
    }
}

/// The slug rule in words, for every message that refuses a name.
pub(crate) const SLUG_RULE: &str =
    "lower-case letters, digits, '_' and '-', starting with a letter or digit, at most 64";

/// Whether `s` is a slug as the schema defines site and section names:
/// `^[a-z0-9][a-z0-9_-]{0,63}$` ([`SLUG_RULE`]; a test keeps the schema's
/// CHECK in agreement).
pub fn is_section_slug(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && matches!(bytes[0], b'a'..=b'z' | b'0'..=b'9')
        && bytes
            .iter()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}

/// `s` if it is a slug, else a message with the rule (for command lines).
pub fn parse_slug(s: &str) -> Result<String, String> {
    if is_section_slug(s) {
        Ok(s.to_owned())
    } else {
        Err(format!("a slug: {SLUG_RULE}"))
    }
}

fn parse_page_number(s: &str) -> Option<i32> {
    let bytes = s.as_bytes();
    let canonical =
        matches!(bytes.first(), Some(b'1'..=b'9')) && bytes.iter().all(u8::is_ascii_digit);
    if canonical { s.parse().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(section: &str, page: i32) -> PageName {
        PageName {
            section: section.into(),
            page,
        }
    }

    #[test]
    fn parses_default_and_named_sections() {
        assert_eq!(
            PageName::parse("sitemap-1.xml.gz"),
            Some((page("", 1), Encoding::Gzip))
        );
        assert_eq!(
            PageName::parse("sitemap-12.xml"),
            Some((page("", 12), Encoding::Plain))
        );
        assert_eq!(
            PageName::parse("sitemap-blog-3.xml.gz"),
            Some((page("blog", 3), Encoding::Gzip))
        );
        assert_eq!(
            PageName::parse("sitemap-blog-posts-3.xml"),
            Some((page("blog-posts", 3), Encoding::Plain))
        );
        assert_eq!(
            PageName::parse("sitemap-5-2.xml.gz"),
            Some((page("5", 2), Encoding::Gzip))
        );
        assert_eq!(
            PageName::parse(&format!("sitemap-{}.xml", i32::MAX)),
            Some((page("", i32::MAX), Encoding::Plain))
        );
    }

    #[test]
    fn news_sitemaps_have_one_name_each_apart_from_any_section() {
        assert_eq!(
            PageName::parse("sitemap_news.xml.gz"),
            Some((PageName::news(1), Encoding::Gzip))
        );
        assert_eq!(
            PageName::parse("sitemap_news-2.xml"),
            Some((PageName::news(2), Encoding::Plain))
        );
        for name in [
            "sitemap_news-1.xml.gz",
            "sitemap_news-02.xml.gz",
            "sitemap_news2.xml.gz",
            "sitemap_news-.xml",
            "sitemap_news.xml.gz.gz",
        ] {
            assert_eq!(PageName::parse(name), None, "{name}");
        }
        assert_eq!(
            PageName::parse("sitemap-news-1.xml.gz"),
            Some((page("news", 1), Encoding::Gzip)),
            "a section named news is a section"
        );
        for n in [1, 2, 40] {
            let name = PageName::news(n);
            assert_eq!(
                PageName::parse(&name.file_name(Encoding::Gzip)),
                Some((name, Encoding::Gzip))
            );
        }
        assert_eq!(PageName::news(1).to_string(), "sitemap_news");
        assert!(!is_section_slug(NEWS_SECTION));
    }

    #[test]
    fn rejects_every_non_canonical_name() {
        for name in [
            "sitemap-0.xml.gz",
            "sitemap-007.xml.gz",
            "sitemap-+5.xml.gz",
            "sitemap--5.xml.gz",
            "sitemap-abc.xml.gz",
            "sitemap-1e3.xml",
            "sitemap- 1.xml",
            "sitemap-1.xml.gz.gz",
            "sitemap-1.gz",
            "sitemap-1",
            "sitemap-.xml",
            "sitemap-blog-.xml",
            "sitemap-Blog-1.xml",
            "sitemap-bl%6fg-1.xml",
            "sitemap-blog-0.xml",
            "sitemap-1000000000000000000000000000000.xml.gz",
            "sitemap-2147483648.xml",
            "sitemap_index.xml",
            "robots.txt",
        ] {
            assert_eq!(PageName::parse(name), None, "{name}");
        }
    }

    #[test]
    fn index_files_have_one_name_each() {
        assert_eq!(
            IndexFile::parse("sitemap_index.xml"),
            Some((IndexFile::Root, Encoding::Plain))
        );
        assert_eq!(
            IndexFile::parse("sitemap_index-1.xml.gz"),
            Some((IndexFile::Part(1), Encoding::Gzip))
        );
        for name in [
            "sitemap_index-02.xml",
            "sitemap_index-0.xml",
            "sitemap_index.gz",
            "sitemap_index-2.xml.gz.gz",
        ] {
            assert_eq!(IndexFile::parse(name), None, "{name}");
        }
        for file in [IndexFile::Root, IndexFile::Part(1), IndexFile::Part(70)] {
            for encoding in [Encoding::Plain, Encoding::Gzip] {
                assert_eq!(
                    IndexFile::parse(&file.file_name(encoding)),
                    Some((file, encoding))
                );
            }
        }
        assert_eq!(IndexFile::of_chunk(1), IndexFile::Root);
        assert_eq!(IndexFile::of_chunk(2), IndexFile::Part(2));
    }

    #[test]
    fn file_names_round_trip() {
        for (p, encoding) in [
            (page("", 7), Encoding::Gzip),
            (page("news-de", 2), Encoding::Plain),
        ] {
            assert_eq!(PageName::parse(&p.file_name(encoding)), Some((p, encoding)));
        }
    }
}
