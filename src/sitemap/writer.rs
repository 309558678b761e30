//! The XML writer: `<urlset>` pages and the `<sitemapindex>`, appended to a
//! byte buffer with no DOM and no per-entry allocation.
//!
//! A loc is written as a URI: non-ASCII characters are percent-encoded as
//! UTF-8 (RFC 3987 §3.1), existing `%XX` escapes and all other ASCII are kept
//! as they are, then the five XML entities are escaped. So an ASCII loc
//! round-trips byte for byte through any XML parser. A loc holding a character
//! XML 1.0 cannot carry (C0 controls, DEL; whitespace is not a URL character
//! either) cannot be emitted at all: the entry is skipped and the caller told
//! why. The schema's CHECK constraints keep such rows out, so this is a last
//! line of defence that keeps every document well-formed.
//!
//! The writer counts URLs and bytes against the page limits as it goes and
//! refuses the entry that would break either, so no over-limit document is
//! ever finished.

use std::fmt;

use time::{OffsetDateTime, UtcOffset};

use super::extensions::{Extensions, Namespaces};

/// The XML declaration and the stylesheet that makes browsers show a table
/// (`sitemap.xsl`, beside every document); crawlers ignore the instruction.
const XML_DECLARATION: &[u8] =
    b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<?xml-stylesheet type=\"text/xsl\" href=\"sitemap.xsl\"?>\n";
const URLSET_OPEN: &[u8] = b"<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"";
const URLSET_CLOSE: &[u8] = b"</urlset>\n";
const INDEX_OPEN: &[u8] = b"<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
const INDEX_CLOSE: &[u8] = b"</sitemapindex>\n";

/// Bytes of the longest `<url>` entry around its loc: every optional element
/// present at its longest (`monthly`, a 5-character priority, a lastmod with
/// offset). Mirrored by the schema's `sitemap_entry_bytes`.
pub(crate) const ENTRY_OVERHEAD: usize = 125;

/// The longest loc the schema admits, in characters.
pub const MAX_LOC_CHARS: usize = 2048;

/// The longest entry any row can render to: a loc of 4-byte characters, each
/// percent-encoded to 12 bytes.
pub(crate) const MAX_ENTRY_BYTES: usize = ENTRY_OVERHEAD + MAX_LOC_CHARS * 12;

/// One `<url>` of a page.
#[derive(Debug, Clone, Copy, Default)]
pub struct UrlEntry<'a> {
    pub loc: &'a str,
    pub lastmod: Option<OffsetDateTime>,
    pub changefreq: Option<&'a str>,
    pub priority: Option<f32>,
    pub extensions: Extensions<'a>,
}

/// Why an entry was left out of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The loc holds a character that XML 1.0 or a URL cannot carry.
    ForbiddenCharacter { byte_offset: usize },
    /// The loc is empty or longer than the protocol allows.
    BadLength,
    /// The loc is not a URI the sitemap schema's `anyURI` accepts.
    InvalidUri {
        byte_offset: usize,
        problem: &'static str,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::ForbiddenCharacter { byte_offset } => write!(
                f,
                "loc has a control or whitespace character at byte {byte_offset}"
            ),
            SkipReason::InvalidUri {
                byte_offset,
                problem,
            } => write!(f, "loc is not a valid URI: {problem} at byte {byte_offset}"),
            SkipReason::BadLength => write!(
                f,
                "loc is empty or over {MAX_LOC_CHARS} characters as served (non-ASCII percent-encoded)"
            ),
        }
    }
}

/// A page would break one of its limits: the document must not be finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "sitemap page over its limits: {urls} URLs (max {max_urls}), {bytes} bytes (max {max_bytes})"
)]
pub struct LimitExceeded {
    pub(crate) urls: u64,
    pub(crate) max_urls: u32,
    pub(crate) bytes: u64,
    pub(crate) max_bytes: u64,
}

/// Writes one `<urlset>` document, entry by entry, within the page limits.
#[derive(Debug)]
pub struct UrlsetWriter {
    max_urls: u32,
    max_bytes: u64,
    namespaces: Namespaces,
    urls: u32,
    bytes: u64,
    /// Entries written without their extensions (see [`Extensions::budget`]).
    deferred: u64,
}

impl UrlsetWriter {
    /// Starts a document in `out` (which it assumes empty of this document).
    pub fn start(out: &mut Vec<u8>, max_urls: u32, max_bytes: u64) -> Self {
        Self::start_with(out, max_urls, max_bytes, Namespaces::default())
    }

    /// Starts a document that declares `namespaces`: entries carry the
    /// extensions of those alone.
    pub(crate) fn start_with(
        out: &mut Vec<u8>,
        max_urls: u32,
        max_bytes: u64,
        namespaces: Namespaces,
    ) -> Self {
        let start = out.len();
        out.extend_from_slice(XML_DECLARATION);
        out.extend_from_slice(URLSET_OPEN);
        namespaces.write(out);
        out.extend_from_slice(b">\n");
        UrlsetWriter {
            max_urls,
            max_bytes,
            namespaces,
            urls: 0,
            bytes: (out.len() - start) as u64,
            deferred: 0,
        }
    }

    /// Entries so far whose extensions were left for a later build: they
    /// changed since their page made room for them, or need a namespace
    /// the document did not declare.
    pub(crate) fn deferred(&self) -> u64 {
        self.deferred
    }

    /// URLs written so far.
    #[cfg(test)]
    fn urls(&self) -> u32 {
        self.urls
    }

    /// Appends one entry; `Ok(Some(reason))` when it had to be left out.
    pub fn push(
        &mut self,
        out: &mut Vec<u8>,
        entry: &UrlEntry<'_>,
    ) -> Result<Option<SkipReason>, LimitExceeded> {
        let start = out.len();
        if let Err(reason) = write_entry(out, entry) {
            out.truncate(start);
            return Ok(Some(reason));
        }
        if !entry.extensions.is_empty() {
            let extensions_start = out.len();
            let written = entry.extensions.write(out, self.namespaces);
            let fits = entry
                .extensions
                .budget
                .is_none_or(|budget| out.len() - start + URL_CLOSE.len() <= budget);
            if written.is_err() || !fits || !self.declares_all(&entry.extensions) {
                out.truncate(extensions_start);
                self.deferred += 1;
            }
        }
        out.extend_from_slice(URL_CLOSE);
        let len = (out.len() - start) as u64;
        let (urls, bytes) = (self.urls + 1, self.bytes + len);
        if urls > self.max_urls || bytes + URLSET_CLOSE.len() as u64 > self.max_bytes {
            out.truncate(start);
            return Err(LimitExceeded {
                urls: u64::from(urls),
                max_urls: self.max_urls,
                bytes: bytes + URLSET_CLOSE.len() as u64,
                max_bytes: self.max_bytes,
            });
        }
        self.urls = urls;
        self.bytes = bytes;
        Ok(None)
    }

    fn declares_all(&self, extensions: &Extensions<'_>) -> bool {
        (self.namespaces.xhtml || extensions.alternates.hrefs.is_empty())
            && (self.namespaces.image || extensions.images.is_empty())
            && (self.namespaces.video || extensions.videos.is_empty())
            && (self.namespaces.news || extensions.news.is_none())
    }

    /// Closes the document; returns its total uncompressed size.
    pub fn finish(self, out: &mut Vec<u8>) -> u64 {
        out.extend_from_slice(URLSET_CLOSE);
        self.bytes + URLSET_CLOSE.len() as u64
    }
}

/// Writes one `<sitemapindex>` document.
#[derive(Debug)]
pub struct IndexWriter;

impl IndexWriter {
    /// Starts an index.
    pub(crate) fn start(out: &mut Vec<u8>) -> Self {
        out.extend_from_slice(XML_DECLARATION);
        out.extend_from_slice(INDEX_OPEN);
        IndexWriter
    }

    /// Appends the `<sitemap>` entry of one file under `base_url` (ending
    /// in `/`), with the time it last changed at full precision, so every
    /// change moves it forward.
    pub(crate) fn push(
        &mut self,
        out: &mut Vec<u8>,
        base_url: &str,
        file_name: &str,
        lastmod: OffsetDateTime,
    ) {
        out.extend_from_slice(b"<sitemap><loc>");
        // The base URL comes from validated configuration and the file name
        // from slugs and digits: neither can hold a forbidden character.
        let _ = write_loc(out, base_url);
        out.extend_from_slice(file_name.as_bytes());
        out.extend_from_slice(b"</loc>");
        if write_datetime(out, b"<lastmod>", lastmod, true) {
            out.extend_from_slice(b"</lastmod>");
        }
        out.extend_from_slice(b"</sitemap>\n");
    }

    pub(crate) fn finish(self, out: &mut Vec<u8>) {
        out.extend_from_slice(INDEX_CLOSE);
    }

    /// How many entries an index of `base_url`'s files holds at most within
    /// `max_bytes`: each entry counted at its longest (the longest name a
    /// page can have, a lastmod to the microsecond), so a long base URL
    /// means fewer entries per index, never an index over the limit.
    pub fn capacity(base_url: &str, max_bytes: u64) -> usize {
        let frame = XML_DECLARATION.len() + INDEX_OPEN.len() + INDEX_CLOSE.len();
        let entry = INDEX_ENTRY_OVERHEAD + entry_bytes(base_url) - ENTRY_OVERHEAD;
        usize::try_from(max_bytes)
            .unwrap_or(usize::MAX)
            .saturating_sub(frame)
            / entry
    }
}

/// An index entry's bytes besides its base URL, at their longest: the tags,
/// a page of a 64-character section numbered with ten digits, gzipped, and
/// a lastmod to the microsecond.
const INDEX_ENTRY_OVERHEAD: usize = "<sitemap><loc>".len()
    + "sitemap-".len()
    + 64
    + "-".len()
    + 10
    + ".xml.gz".len()
    + "</loc><lastmod>".len()
    + "2026-11-23T22:47:00.123456+00:00".len()
    + "</lastmod></sitemap>\n".len();

/// The most bytes `loc`'s entry can take: [`ENTRY_OVERHEAD`] plus the loc as
/// written. Equal to the schema's `sitemap_entry_bytes(loc)`.
pub fn entry_bytes(loc: &str) -> usize {
    ENTRY_OVERHEAD
        + loc
            .bytes()
            .map(|b| match b {
                b'&' => 5,
                b'<' | b'>' => 4,
                b'"' | b'\'' => 6,
                0x80.. => 3,
                _ => 1,
            })
            .sum::<usize>()
}

/// The loc's length in characters as written in `<loc>`, where each
/// non-ASCII byte becomes three (`%XX`): what the XSD's 2,048 applies to.
pub fn served_chars(loc: &str) -> usize {
    loc.bytes().map(|b| if b < 0x80 { 1 } else { 3 }).sum()
}

/// Where `loc` breaks URI syntax (RFC 3986) in a way that percent-encoding
/// non-ASCII does not mend, and how: the schema's `anyURI` refuses such a
/// loc, so it can be neither stored by import nor served.
pub(crate) fn uri_problem(loc: &str) -> Option<(usize, &'static str)> {
    let bytes = loc.as_bytes();
    // The authority (where an IPv6 literal's brackets belong) ends at the
    // first '/', '?' or '#' after "scheme://".
    let authority_end = loc.find("://").map_or(0, |start| {
        let from = start + 3;
        loc[from..]
            .find(['/', '?', '#'])
            .map_or(loc.len(), |end| from + end)
    });
    let mut fragment = false;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'%' if !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)) =>
            {
                return Some((i, "'%' not followed by two hex digits"));
            }
            b'[' | b']' if i >= authority_end => {
                return Some((i, "'[' or ']' outside the host"));
            }
            b'#' if fragment => return Some((i, "a second '#'")),
            b'#' => fragment = true,
            _ => {}
        }
    }
    None
}

fn write_entry(out: &mut Vec<u8>, entry: &UrlEntry<'_>) -> Result<(), SkipReason> {
    if entry.loc.is_empty() || served_chars(entry.loc) > MAX_LOC_CHARS {
        return Err(SkipReason::BadLength);
    }
    if let Some((byte_offset, problem)) = uri_problem(entry.loc) {
        return Err(SkipReason::InvalidUri {
            byte_offset,
            problem,
        });
    }
    out.extend_from_slice(b"<url><loc>");
    write_loc(out, entry.loc)?;
    out.extend_from_slice(b"</loc>");
    if let Some(lastmod) = entry.lastmod
        && write_datetime(out, b"<lastmod>", lastmod, false)
    {
        out.extend_from_slice(b"</lastmod>");
    }
    if let Some(changefreq) = entry.changefreq.filter(|c| super::CHANGEFREQS.contains(c)) {
        out.extend_from_slice(b"<changefreq>");
        out.extend_from_slice(changefreq.as_bytes());
        out.extend_from_slice(b"</changefreq>");
    }
    if let Some(priority) = entry.priority.filter(|p| (0.0..=1.0).contains(p)) {
        out.extend_from_slice(b"<priority>");
        write_priority(out, priority);
        out.extend_from_slice(b"</priority>");
    }
    Ok(())
}

const URL_CLOSE: &[u8] = b"</url>\n";

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Writes `loc` percent-encoding non-ASCII and escaping XML.
pub(super) fn write_loc(out: &mut Vec<u8>, loc: &str) -> Result<(), SkipReason> {
    write_escaped(out, loc, |_, _, byte| match byte {
        0x00..=0x20 | 0x7f => Escape::Refuse,
        0x80.. => Escape::Percent,
        _ => Escape::Keep,
    })
}

/// Writes `text` with the five XML entities escaped; refuses the
/// characters XML 1.0 cannot carry.
pub(super) fn write_text(out: &mut Vec<u8>, text: &str) -> Result<(), SkipReason> {
    write_escaped(out, text, |bytes, i, byte| match byte {
        b'\t' | b'\n' | b'\r' => Escape::Keep,
        0x00..=0x1f => Escape::Refuse,
        // U+FFFE and U+FFFF (EF BF BE / EF BF BF)
        0xef if bytes.get(i + 1) == Some(&0xbf)
            && matches!(bytes.get(i + 2), Some(0xbe | 0xbf)) =>
        {
            Escape::Refuse
        }
        _ => Escape::Keep,
    })
}

/// What becomes of a byte that is not one of the five XML entities.
enum Escape {
    Keep,
    /// Written as `%XX`.
    Percent,
    /// XML cannot carry it: the value is left out.
    Refuse,
}

/// Writes `value` with the five XML entities escaped and every other byte
/// as `other` says, copying runs of kept bytes at once. `other` sees the
/// whole value, the byte's offset and the byte.
#[inline(always)]
fn write_escaped(
    out: &mut Vec<u8>,
    value: &str,
    other: impl Fn(&[u8], usize, u8) -> Escape,
) -> Result<(), SkipReason> {
    let bytes = value.as_bytes();
    let mut run_start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let percent;
        let replacement: &[u8] = match byte {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&apos;",
            _ => match other(bytes, i, byte) {
                Escape::Keep => continue,
                Escape::Percent => {
                    percent = [
                        b'%',
                        HEX[usize::from(byte >> 4)],
                        HEX[usize::from(byte & 0xf)],
                    ];
                    &percent
                }
                Escape::Refuse => return Err(SkipReason::ForbiddenCharacter { byte_offset: i }),
            },
        };
        out.extend_from_slice(&bytes[run_start..i]);
        out.extend_from_slice(replacement);
        run_start = i + 1;
    }
    out.extend_from_slice(&bytes[run_start..]);
    Ok(())
}

/// Writes `open` and a W3C datetime in UTC with an explicit `+00:00` offset,
/// to the second, or with microseconds (trailing zeros trimmed) when
/// `subsecond`. Returns false, writing nothing, for a year outside 0001-9999,
/// which W3C datetimes cannot express.
fn write_datetime(out: &mut Vec<u8>, open: &[u8], at: OffsetDateTime, subsecond: bool) -> bool {
    let at = at.to_offset(UtcOffset::UTC);
    let Ok(year) = u16::try_from(at.year()) else {
        return false;
    };
    // XML Schema 1.0's dateTime, which the sitemap XSD uses, has no year 0.
    if year == 0 || year > 9999 {
        return false;
    }
    out.extend_from_slice(open);
    push_digits(out, u32::from(year), 4);
    out.push(b'-');
    push_digits(out, u32::from(u8::from(at.month())), 2);
    out.push(b'-');
    push_digits(out, u32::from(at.day()), 2);
    out.push(b'T');
    push_digits(out, u32::from(at.hour()), 2);
    out.push(b':');
    push_digits(out, u32::from(at.minute()), 2);
    out.push(b':');
    push_digits(out, u32::from(at.second()), 2);
    let micros = at.microsecond();
    if subsecond && micros > 0 {
        out.push(b'.');
        let mut digits = 6;
        let mut fraction = micros;
        while fraction.is_multiple_of(10) {
            fraction /= 10;
            digits -= 1;
        }
        push_digits(out, fraction, digits);
    }
    out.extend_from_slice(b"+00:00");
    true
}

/// Priority rounded to at most three decimals, trailing zeros trimmed but one
/// kept: `0.5`, `1.0`, `0.85`, `0.125`.
fn write_priority(out: &mut Vec<u8>, priority: f32) {
    write_thousandths(out, (priority * 1000.0).round() as u32);
}

/// A non-negative number rounded to at most three decimals, trailing zeros
/// trimmed but one kept, as a rating is written: `4.2`, `5.0`, `3.125`.
pub(super) fn write_decimal(out: &mut Vec<u8>, value: f64) {
    write_thousandths(out, (value * 1000.0).round() as u32);
}

/// `thousandths` / 1000 with at most three decimals, trailing zeros trimmed
/// but one kept.
fn write_thousandths(out: &mut Vec<u8>, thousandths: u32) {
    let whole = thousandths / 1000;
    push_digits(out, whole, whole.checked_ilog10().unwrap_or(0) + 1);
    out.push(b'.');
    let mut fraction = thousandths % 1000;
    let mut digits = 3;
    while digits > 1 && fraction.is_multiple_of(10) {
        fraction /= 10;
        digits -= 1;
    }
    push_digits(out, fraction, digits);
}

fn push_digits(out: &mut Vec<u8>, value: u32, width: u32) {
    for place in (0..width).rev() {
        out.push(b'0' + (value / 10u32.pow(place) % 10) as u8);
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn entry(loc: &str) -> UrlEntry<'_> {
        UrlEntry {
            loc,
            lastmod: None,
            changefreq: None,
            priority: None,
            ..Default::default()
        }
    }

    fn page(entries: &[UrlEntry<'_>]) -> String {
        let mut out = Vec::new();
        let mut writer = UrlsetWriter::start(&mut out, 50_000, 52_428_800);
        for e in entries {
            assert_eq!(writer.push(&mut out, e), Ok(None));
        }
        let total = writer.finish(&mut out);
        assert_eq!(total, out.len() as u64);
        String::from_utf8(out).expect("writer emits UTF-8")
    }

    #[test]
    fn writes_exact_bytes() {
        let full = UrlEntry {
            loc: "https://example.com/a?b=1&c=<2>\"'",
            lastmod: Some(datetime!(2026-11-21 09:30:05.123 +02:00)),
            changefreq: Some("weekly"),
            priority: Some(0.8),
            ..Default::default()
        };
        assert_eq!(
            page(&[full, entry("https://example.com/")]),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <?xml-stylesheet type=\"text/xsl\" href=\"sitemap.xsl\"?>\n\
             <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n\
             <url><loc>https://example.com/a?b=1&amp;c=&lt;2&gt;&quot;&apos;</loc>\
             <lastmod>2026-11-21T07:30:05+00:00</lastmod><changefreq>weekly</changefreq>\
             <priority>0.8</priority></url>\n\
             <url><loc>https://example.com/</loc></url>\n\
             </urlset>\n"
        );
    }

    #[test]
    fn percent_encodes_non_ascii_and_keeps_existing_escapes() {
        let doc = page(&[entry(
            "https://example.com/caf\u{e9}/%C3%A9?q=a%20b&x=\u{1F600}",
        )]);
        assert!(
            doc.contains(
                "<loc>https://example.com/caf%C3%A9/%C3%A9?q=a%20b&amp;x=%F0%9F%98%80</loc>"
            ),
            "{doc}"
        );
    }

    #[test]
    fn skips_locs_xml_cannot_carry() {
        let mut out = Vec::new();
        let mut writer = UrlsetWriter::start(&mut out, 10, 1 << 20);
        let before = out.len();
        for (loc, reason) in [
            (
                "https://e.com/a\u{1}b",
                SkipReason::ForbiddenCharacter { byte_offset: 15 },
            ),
            (
                "https://e.com/a b",
                SkipReason::ForbiddenCharacter { byte_offset: 15 },
            ),
            (
                "https://e.com/\u{7f}",
                SkipReason::ForbiddenCharacter { byte_offset: 14 },
            ),
            (
                "https://e.com/\t",
                SkipReason::ForbiddenCharacter { byte_offset: 14 },
            ),
            ("", SkipReason::BadLength),
        ] {
            assert_eq!(
                writer.push(&mut out, &entry(loc)),
                Ok(Some(reason)),
                "{loc:?}"
            );
        }
        let long = format!("https://e.com/{}", "a".repeat(MAX_LOC_CHARS));
        assert_eq!(
            writer.push(&mut out, &entry(&long)),
            Ok(Some(SkipReason::BadLength))
        );
        assert_eq!(out.len(), before, "a skipped entry leaves no bytes behind");
        assert_eq!(writer.urls(), 0);
    }

    #[test]
    fn locs_the_schema_refuses_as_uris_are_left_out() {
        for (loc, offset) in [
            ("https://e.com/50%-off", 16),
            ("https://e.com/a%4", 15),
            ("https://e.com/a[1]", 15),
            ("https://e.com/a#b#c", 17),
        ] {
            assert_eq!(uri_problem(loc).map(|(i, _)| i), Some(offset), "{loc}");
        }
        for loc in [
            "https://[::1]:8080/a%41?b=1#c",
            "https://e.com/%C3%A9",
            "https://e.com/a#b",
        ] {
            assert_eq!(uri_problem(loc), None, "{loc}");
        }
    }

    #[test]
    fn the_loc_limit_counts_characters_as_served() {
        // "é" is two bytes, so six characters once percent-encoded:
        // 14 + 339 × 6 = 2,048.
        let at_limit = format!("https://e.com/{}", "é".repeat(339));
        assert_eq!(served_chars(&at_limit), MAX_LOC_CHARS);
        let over = format!("{at_limit}a");
        let mut out = Vec::new();
        let mut writer = UrlsetWriter::start(&mut out, 10, 1_000_000);
        assert_eq!(writer.push(&mut out, &entry(&at_limit)), Ok(None));
        assert_eq!(
            writer.push(&mut out, &entry(&over)),
            Ok(Some(SkipReason::BadLength))
        );
        assert_eq!(writer.urls(), 1);
    }

    #[test]
    fn enforces_the_url_limit() {
        let mut out = Vec::new();
        let mut writer = UrlsetWriter::start(&mut out, 2, 1 << 20);
        for _ in 0..2 {
            assert_eq!(writer.push(&mut out, &entry("https://e.com/")), Ok(None));
        }
        let len = out.len();
        let err = writer
            .push(&mut out, &entry("https://e.com/"))
            .expect_err("third URL");
        assert_eq!((err.urls, err.max_urls), (3, 2));
        assert_eq!(out.len(), len);
    }

    #[test]
    fn enforces_the_byte_limit_counting_the_closing_tag() {
        let loc = "https://e.com/x";
        let header = XML_DECLARATION.len() + URLSET_OPEN.len() + ">\n".len();
        let one = "<url><loc>https://e.com/x</loc></url>\n".len();
        let max_bytes = (header + 2 * one + URLSET_CLOSE.len()) as u64;
        let mut out = Vec::new();
        let mut writer = UrlsetWriter::start(&mut out, 100, max_bytes);
        assert_eq!(writer.push(&mut out, &entry(loc)), Ok(None));
        assert_eq!(writer.push(&mut out, &entry(loc)), Ok(None));
        assert!(writer.push(&mut out, &entry(loc)).is_err());
        assert_eq!(writer.finish(&mut out), max_bytes);
        assert_eq!(out.len() as u64, max_bytes);
    }

    #[test]
    fn entry_overhead_is_the_longest_entry_around_its_loc() {
        let longest = UrlEntry {
            loc: "",
            lastmod: Some(datetime!(2026-12-31 23:59:59 UTC)),
            changefreq: Some("monthly"),
            priority: Some(0.125),
            ..Default::default()
        };
        let mut out = Vec::new();
        // An empty loc is refused, so measure around a one-byte loc.
        let one = UrlEntry {
            loc: "h",
            ..longest
        };
        write_entry(&mut out, &one).expect("writable");
        assert_eq!(out.len() + URL_CLOSE.len(), ENTRY_OVERHEAD + 1);
    }

    #[test]
    fn entry_bytes_bounds_every_rendering() {
        for loc in [
            "https://e.com/",
            "https://e.com/&<>\"'",
            "https://e.com/\u{e9}\u{1F600}",
            "https://e.com/%41?x=1",
        ] {
            for (changefreq, priority) in [
                (None, None),
                (Some("always"), Some(1.0)),
                (Some("monthly"), Some(0.333)),
            ] {
                let mut out = Vec::new();
                let e = UrlEntry {
                    loc,
                    lastmod: Some(datetime!(2026-01-02 03:04:05 UTC)),
                    changefreq,
                    priority,
                    ..Default::default()
                };
                write_entry(&mut out, &e).expect("writable");
                assert!(out.len() + URL_CLOSE.len() <= entry_bytes(loc), "{loc}");
            }
        }
        assert_eq!(
            entry_bytes("https://e.com/\u{1F600}"),
            ENTRY_OVERHEAD + 14 + 12
        );
    }

    #[test]
    fn datetimes_carry_an_offset_and_stay_within_w3c_years() {
        let mut out = Vec::new();
        assert!(write_datetime(
            &mut out,
            b"",
            datetime!(0999-01-02 03:04:05 -01:30),
            false
        ));
        assert_eq!(out, b"0999-01-02T04:34:05+00:00");
        out.clear();
        assert!(!write_datetime(
            &mut out,
            b"<x>",
            datetime!(-0001-01-01 00:00 UTC),
            false
        ));
        assert!(!write_datetime(
            &mut out,
            b"<x>",
            datetime!(0000-12-31 23:59:59 UTC),
            false
        ));
        assert!(out.is_empty());
        assert!(write_datetime(
            &mut out,
            b"",
            datetime!(2026-11-21 09:30:00.1205 UTC),
            true
        ));
        assert_eq!(out, b"2026-11-21T09:30:00.1205+00:00");
        out.clear();
        assert!(write_datetime(
            &mut out,
            b"",
            datetime!(2026-11-21 09:30:00 UTC),
            true
        ));
        assert_eq!(out, b"2026-11-21T09:30:00+00:00");
    }

    #[test]
    fn priorities_round_to_thousandths() {
        for (p, text) in [
            (0.0, "0.0"),
            (1.0, "1.0"),
            (0.5, "0.5"),
            (0.85, "0.85"),
            (0.125, "0.125"),
            (0.3333, "0.333"),
        ] {
            let mut out = Vec::new();
            write_priority(&mut out, p);
            assert_eq!(String::from_utf8(out).expect("ascii"), text);
        }
    }

    #[test]
    fn index_lists_pages_under_the_base_url() {
        let mut out = Vec::new();
        let mut index = IndexWriter::start(&mut out);
        index.push(
            &mut out,
            "https://example.com/shop/",
            "sitemap-blog-2.xml.gz",
            datetime!(2026-11-21 09:30:00.5 UTC),
        );
        index.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).expect("ascii"),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <?xml-stylesheet type=\"text/xsl\" href=\"sitemap.xsl\"?>\n\
             <sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n\
             <sitemap><loc>https://example.com/shop/sitemap-blog-2.xml.gz</loc>\
             <lastmod>2026-11-21T09:30:00.5+00:00</lastmod></sitemap>\n\
             </sitemapindex>\n"
        );
    }

    #[test]
    fn an_index_of_its_capacity_in_the_longest_entries_fits_its_byte_limit() {
        let section = "s".repeat(64);
        for base_url in [
            "https://example.com/".to_owned(),
            format!("https://example.com/{}/", "café&".repeat(300)),
        ] {
            for max_bytes in [11_000, 52_428_800] {
                let capacity = IndexWriter::capacity(&base_url, max_bytes);
                let mut out = Vec::new();
                let mut index = IndexWriter::start(&mut out);
                for _ in 0..capacity {
                    index.push(
                        &mut out,
                        &base_url,
                        &format!("sitemap-{section}-2147483647.xml.gz"),
                        datetime!(2026-11-21 09:30:00.123456 UTC),
                    );
                }
                index.finish(&mut out);
                assert!(out.len() as u64 <= max_bytes, "{base_url}: {}", out.len());
                // One more entry would not have fitted.
                let frame = XML_DECLARATION.len() + INDEX_OPEN.len() + INDEX_CLOSE.len();
                let entry = (out.len() - frame) / capacity;
                assert!(
                    out.len() + entry > max_bytes as usize,
                    "{base_url}: room for more"
                );
            }
        }
    }
}
