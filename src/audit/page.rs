//! What an audited URL's answer says about it: its status, where it
//! redirects, whether it asks not to be indexed, and whether it names
//! another URL canonical. Headers are read as crawlers read them; the body
//! with html5ever's tokenizer (the HTML standard's), never a pattern.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, StartTag, Tag, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use reqwest::header::{self, HeaderMap};
use url::Url;

/// What a check found, worst first where several apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Finding {
    Ok,
    /// A 3xx answer: crawlers are sent elsewhere.
    Redirect,
    /// 404.
    NotFound,
    /// 410.
    Gone,
    /// `noindex` (or `none`) in `X-Robots-Tag` or a robots `<meta>`.
    Noindex,
    /// A canonical URL other than the loc, in a `Link` header or a
    /// `<link rel="canonical">`.
    CanonicalElsewhere,
    /// Any other status, or no answer within the limits.
    Error,
}

impl Finding {
    /// As stats, the schema and the metrics name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Finding::Ok => "ok",
            Finding::Redirect => "redirect",
            Finding::NotFound => "not-found",
            Finding::Gone => "gone",
            Finding::Noindex => "noindex",
            Finding::CanonicalElsewhere => "canonical-elsewhere",
            Finding::Error => "error",
        }
    }
}

/// One URL's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checked {
    pub(crate) status: Option<u16>,
    /// Where a redirect points, as sent.
    pub(crate) location: Option<String>,
    pub(crate) noindex: bool,
    /// The canonical URL named, resolved against the loc.
    pub(crate) canonical: Option<String>,
    pub(crate) finding: Finding,
    /// Why the check failed, for [`Finding::Error`].
    pub(crate) detail: Option<String>,
}

impl Checked {
    /// A check that got no answer.
    pub(crate) fn failed(detail: String) -> Checked {
        Checked {
            status: None,
            location: None,
            noindex: false,
            canonical: None,
            finding: Finding::Error,
            detail: Some(detail),
        }
    }
}

/// The agents whose directives count: every crawler's, Google's and Bing's.
const AGENTS: [&str; 3] = ["robots", "googlebot", "bingbot"];

/// Judges the answer to a request for `loc`: its status, headers and the
/// first bytes of its body (at most what the caller read).
pub(crate) fn judge(loc: &Url, status: u16, headers: &HeaderMap, body: &[u8]) -> Checked {
    let location = headers
        .get(header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let html = is_html(headers).then(|| read_html(loc, body));
    let noindex = header_noindex(headers) || html.as_ref().is_some_and(|h| h.noindex);
    let canonical = link_header_canonical(loc, headers).or_else(|| html.and_then(|h| h.canonical));
    let elsewhere = canonical
        .as_deref()
        .is_some_and(|canonical| canonical != without_fragment(loc).as_str());
    let finding = match status {
        300..=399 => Finding::Redirect,
        404 => Finding::NotFound,
        410 => Finding::Gone,
        200..=299 if noindex => Finding::Noindex,
        200..=299 if elsewhere => Finding::CanonicalElsewhere,
        200..=299 => Finding::Ok,
        _ => Finding::Error,
    };
    Checked {
        status: Some(status),
        location: location.filter(|_| finding == Finding::Redirect),
        noindex,
        canonical,
        finding,
        detail: (finding == Finding::Error).then(|| format!("answered {status}")),
    }
}

fn without_fragment(url: &Url) -> Url {
    let mut url = url.clone();
    url.set_fragment(None);
    url
}

/// Whether the body is HTML: a `text/html` or XHTML type, or none given.
fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_none_or(|value| {
            let essence = value.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("text/html")
                || essence.eq_ignore_ascii_case("application/xhtml+xml")
        })
}

/// Whether a robots directive list (`noindex, nofollow`) says not to
/// index.
fn says_noindex(directives: &str) -> bool {
    directives.split(',').any(|directive| {
        let directive = directive.trim();
        directive.eq_ignore_ascii_case("noindex") || directive.eq_ignore_ascii_case("none")
    })
}

/// `X-Robots-Tag: noindex`, for every crawler or one of [`AGENTS`]
/// (`X-Robots-Tag: googlebot: noindex`).
fn header_noindex(headers: &HeaderMap) -> bool {
    headers
        .get_all("x-robots-tag")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| {
            // A leading `agent:` names whom the rest is for; a directive
            // never contains a colon but `unavailable_after: date`.
            match value.split_once(':') {
                Some((agent, rest))
                    if !agent.trim().contains([' ', ','])
                        && !agent.trim().eq_ignore_ascii_case("unavailable_after") =>
                {
                    AGENTS.iter().any(|a| agent.trim().eq_ignore_ascii_case(a))
                        && says_noindex(rest)
                }
                _ => says_noindex(value),
            }
        })
}

/// The target of a `Link: <…>; rel="canonical"` header, resolved against
/// `loc`.
fn link_header_canonical(loc: &Url, headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::LINK)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(split_links)
        .find_map(|link| {
            let (target, params) = link.trim().strip_prefix('<')?.split_once('>')?;
            let canonical = params.split(';').any(|param| {
                let Some((name, value)) = param.split_once('=') else {
                    return false;
                };
                name.trim().eq_ignore_ascii_case("rel")
                    && value
                        .trim()
                        .trim_matches('"')
                        .split_ascii_whitespace()
                        .any(|rel| rel.eq_ignore_ascii_case("canonical"))
            });
            canonical
                .then(|| loc.join(target.trim()).ok())
                .flatten()
                .map(|url| without_fragment(&url).to_string())
        })
}

/// The links of one `Link` header value, split at commas outside `<…>`.
fn split_links(value: &str) -> Vec<&str> {
    let mut links = Vec::new();
    let (mut start, mut in_target) = (0, false);
    for (at, c) in value.char_indices() {
        match c {
            '<' => in_target = true,
            '>' => in_target = false,
            ',' if !in_target => {
                links.push(&value[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    links.push(&value[start..]);
    links
}

/// What the HTML says.
#[derive(Debug, Default)]
struct HtmlFindings {
    noindex: bool,
    canonical: Option<String>,
}

/// Reads `<meta name="robots">` (and Google's and Bing's) and `<link
/// rel="canonical">` (with `<base href>`) from the body's tags.
fn read_html(loc: &Url, body: &[u8]) -> HtmlFindings {
    let sink = HeadReader {
        loc: loc.clone(),
        base: RefCell::new(None),
        found: RefCell::new(HtmlFindings::default()),
    };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from(String::from_utf8_lossy(body).as_ref()));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.found.into_inner()
}

struct HeadReader {
    loc: Url,
    base: RefCell<Option<Url>>,
    found: RefCell<HtmlFindings>,
}

impl HeadReader {
    fn attribute<'a>(tag: &'a Tag, name: &str) -> Option<&'a str> {
        tag.attrs
            .iter()
            .find(|attr| {
                let local: &str = &attr.name.local;
                local.eq_ignore_ascii_case(name)
            })
            .map(|attr| attr.value.as_ref())
    }

    fn start_tag(&self, tag: &Tag) {
        let name: &str = &tag.name;
        match name {
            "meta" => {
                let named = Self::attribute(tag, "name")
                    .is_some_and(|name| AGENTS.iter().any(|a| name.trim().eq_ignore_ascii_case(a)));
                if named && Self::attribute(tag, "content").is_some_and(says_noindex) {
                    self.found.borrow_mut().noindex = true;
                }
            }
            "base" if self.base.borrow().is_none() => {
                *self.base.borrow_mut() =
                    Self::attribute(tag, "href").and_then(|href| self.loc.join(href.trim()).ok());
            }
            "link" if self.found.borrow().canonical.is_none() => {
                let canonical = Self::attribute(tag, "rel").is_some_and(|rel| {
                    rel.split_ascii_whitespace()
                        .any(|rel| rel.eq_ignore_ascii_case("canonical"))
                });
                if canonical && let Some(href) = Self::attribute(tag, "href") {
                    let base = self
                        .base
                        .borrow()
                        .clone()
                        .unwrap_or_else(|| self.loc.clone());
                    self.found.borrow_mut().canonical = base
                        .join(href.trim())
                        .ok()
                        .map(|url| without_fragment(&url).to_string());
                }
            }
            _ => {}
        }
    }
}

impl TokenSink for HeadReader {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let Token::TagToken(tag) = token else {
            return TokenSinkResult::Continue;
        };
        if tag.kind != StartTag {
            return TokenSinkResult::Continue;
        }
        self.start_tag(&tag);
        // What a tree builder would tell the tokenizer: these elements'
        // text is not markup, so a `<meta>` in a script is not a tag.
        let name: &str = &tag.name;
        match name {
            "script" => TokenSinkResult::RawData(RawKind::ScriptData),
            "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
                TokenSinkResult::RawData(RawKind::Rawtext)
            }
            "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
            "plaintext" => TokenSinkResult::Plaintext,
            _ => TokenSinkResult::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};

    use super::*;

    fn loc() -> Url {
        Url::parse("https://shop.example/products/1").expect("URL")
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    fn html(body: &str) -> Checked {
        judge(
            &loc(),
            200,
            &headers(&[("content-type", "text/html; charset=utf-8")]),
            body.as_bytes(),
        )
    }

    #[test]
    fn statuses_are_findings_of_their_own() {
        let redirect = judge(&loc(), 301, &headers(&[("location", "/products/2")]), b"");
        assert_eq!(redirect.finding, Finding::Redirect);
        assert_eq!(redirect.location.as_deref(), Some("/products/2"));
        assert_eq!(
            judge(&loc(), 404, &HeaderMap::new(), b"").finding,
            Finding::NotFound
        );
        assert_eq!(
            judge(&loc(), 410, &HeaderMap::new(), b"").finding,
            Finding::Gone
        );
        let error = judge(&loc(), 503, &HeaderMap::new(), b"");
        assert_eq!(
            (error.finding, error.detail.as_deref()),
            (Finding::Error, Some("answered 503"))
        );
        assert_eq!(html("<p>fine</p>").finding, Finding::Ok);
    }

    #[test]
    fn noindex_comes_from_the_header_or_a_robots_meta() {
        for value in [
            "noindex",
            "noindex, nofollow",
            "NONE",
            "googlebot: noindex",
            "bingbot: nofollow, noindex",
        ] {
            let checked = judge(&loc(), 200, &headers(&[("x-robots-tag", value)]), b"");
            assert_eq!(checked.finding, Finding::Noindex, "{value}");
        }
        for value in [
            "nofollow",
            "otherbot: noindex",
            "unavailable_after: 25 Jun 2010 15:00:00 PST",
        ] {
            let checked = judge(&loc(), 200, &headers(&[("x-robots-tag", value)]), b"");
            assert_eq!(checked.finding, Finding::Ok, "{value}");
        }
        assert_eq!(
            html(r#"<html><head><META NAME="Robots" CONTENT="NoIndex, follow"></head></html>"#)
                .finding,
            Finding::Noindex
        );
        assert_eq!(
            html(r#"<meta name=googlebot content=none>"#).finding,
            Finding::Noindex
        );
        // Markup inside a script or a comment is not a tag.
        assert_eq!(
            html(r#"<script>document.write('<meta name="robots" content="noindex">')</script><!-- <meta name="robots" content="noindex"> -->"#)
                .finding,
            Finding::Ok
        );
        assert_eq!(
            html(r#"<meta name="description" content="noindex">"#).finding,
            Finding::Ok
        );
    }

    #[test]
    fn a_canonical_elsewhere_is_found_in_the_link_header_or_the_html() {
        let checked = judge(
            &loc(),
            200,
            &headers(&[(
                "link",
                r#"<https://cdn.example/x.css>; rel=preload, </products/1?ref=a>; rel="canonical""#,
            )]),
            b"",
        );
        assert_eq!(checked.finding, Finding::CanonicalElsewhere);
        assert_eq!(
            checked.canonical.as_deref(),
            Some("https://shop.example/products/1?ref=a")
        );
        let own = html(r#"<link rel="canonical" href="https://shop.example/products/1#top">"#);
        assert_eq!(own.finding, Finding::Ok);
        let relative = html(
            r#"<head><base href="https://shop.example/en/"><link rel="alternate canonical" href="products/1"></head>"#,
        );
        assert_eq!(
            relative.canonical.as_deref(),
            Some("https://shop.example/en/products/1")
        );
        assert_eq!(relative.finding, Finding::CanonicalElsewhere);
        // A body that is not HTML is not read for tags.
        let text = judge(
            &loc(),
            200,
            &headers(&[("content-type", "text/plain")]),
            br#"<link rel="canonical" href="/elsewhere">"#,
        );
        assert_eq!(text.finding, Finding::Ok);
    }

    #[test]
    fn garbage_is_read_without_a_finding() {
        let garbage: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        assert_eq!(
            judge(&loc(), 200, &HeaderMap::new(), &garbage).finding,
            Finding::Ok
        );
    }
}
