//! What a request's `Host` says: whether it is valid, and the host name it
//! is routed by (see `site::directory`).

use std::borrow::Cow;

use axum::http::{HeaderMap, Uri, Version, header};

/// The host name a request is routed by, lower-cased and without port:
/// from its `Host`, or from an absolute request target when it has no
/// `Host` (an HTTP/1.0 request may not). `Err` says what is wrong with its
/// `Host` (RFC 9112 §3.2): an HTTP/1.1 request must carry exactly one, and
/// any request's must be a valid `host[:port]`. One pass over the header,
/// which every request is routed by.
pub(super) fn request_host<'a>(
    version: Version,
    headers: &'a HeaderMap,
    uri: &'a Uri,
) -> Result<Option<Cow<'a, str>>, &'static str> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (None, _) if version >= Version::HTTP_11 => {
            return Err("an HTTP/1.1 request needs a Host header");
        }
        (None, _) => match uri.authority() {
            Some(authority) => authority.host(),
            None => return Ok(None),
        },
        (Some(_), Some(_)) => return Err("more than one Host header"),
        (Some(value), None) => {
            host_of(value.as_bytes()).ok_or("the Host header is not a valid host[:port]")?
        }
    };
    Ok(Some(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }))
}

/// The host of a `host[:port]` (a name, an IPv4 address or a bracketed IPv6
/// one; the port, if there is one, empty or a number under 65,536), or
/// `None` if `authority` is not one. Parsed here rather than as a URI
/// authority, which allocates.
fn host_of(authority: &[u8]) -> Option<&str> {
    let (host, port) = if authority.first() == Some(&b'[') {
        let end = authority.iter().position(|&b| b == b']')? + 1;
        authority.split_at(end)
    } else {
        let end = authority.iter().position(|&b| b == b':');
        authority.split_at(end.unwrap_or(authority.len()))
    };
    let port_is_valid = match port {
        [] | [b':'] => true,
        [b':', digits @ ..] => digits
            .iter()
            .try_fold(0_u32, |n, &d| {
                let n = n * 10 + u32::from(d.wrapping_sub(b'0'));
                (d.is_ascii_digit() && n <= u32::from(u16::MAX)).then_some(n)
            })
            .is_some(),
        _ => false,
    };
    if !(is_host(host) && port_is_valid) {
        return None;
    }
    // Every byte `is_host` lets through is ASCII.
    std::str::from_utf8(host).ok()
}

/// An IPv6 literal in brackets, or a registered name or IPv4 address of the
/// characters RFC 3986 allows.
fn is_host(host: &[u8]) -> bool {
    if let [b'[', address @ .., b']'] = host {
        return !address.is_empty()
            && address
                .iter()
                .all(|b| b.is_ascii_hexdigit() || b":.".contains(b));
    }
    !host.is_empty() && host.iter().all(|&b| NAME_BYTES[usize::from(b)])
}

/// The bytes of a registered name or IPv4 address (RFC 3986 `reg-name`:
/// unreserved, sub-delims and the `%` of percent-encodings), as a table:
/// every request's `Host` is checked byte by byte.
const NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 128 {
        table[byte] = (byte as u8).is_ascii_alphanumeric();
        byte += 1;
    }
    let punctuation = b"-._~!$&'()*+,;=%";
    let mut i = 0;
    while i < punctuation.len() {
        table[punctuation[i] as usize] = true;
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn problem(version: Version, headers: &HeaderMap) -> Option<&'static str> {
        request_host(version, headers, &Uri::from_static("/x")).err()
    }

    #[test]
    fn a_missing_duplicated_or_malformed_host_is_named() {
        let with = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(header::HOST, value.parse().expect("header"));
            }
            headers
        };
        let http11 = Version::HTTP_11;
        assert_eq!(problem(http11, &with(&["www.example.com"])), None);
        assert_eq!(problem(http11, &with(&["[::1]:8080"])), None);
        assert_eq!(problem(http11, &with(&["192.0.2.1:"])), None);
        assert_eq!(problem(http11, &with(&["a.example:065535"])), None);
        assert_eq!(problem(http11, &with(&["[2001:db8::1]"])), None);
        assert_eq!(
            problem(http11, &with(&["a-b_c~!$&'()*+,;=%20.example"])),
            None
        );
        assert_eq!(problem(Version::HTTP_10, &with(&[])), None);
        assert!(problem(http11, &with(&[])).is_some_and(|p| p.contains("needs")));
        assert!(problem(http11, &with(&["a.example", "b.example"])).is_some());
        for bad in [
            "bad host",
            "user@www.example.com",
            "a/b.example",
            "a.example\t",
            ":8080",
            "a.example:port",
            "a.example:+80",
            "a.example:70000",
            "a.example:65536",
            "a.example:80:80",
            "[::1",
            "[]:80",
            "[::1]x",
            "[::g]",
            "",
        ] {
            assert!(problem(http11, &with(&[bad])).is_some(), "{bad:?}");
        }
        let obs_text = HeaderValue::from_bytes(b"caf\xc3\xa9.example").expect("header");
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, obs_text);
        assert!(problem(http11, &headers).is_some(), "bytes past ASCII");
    }

    #[test]
    fn hosts_are_matched_without_port_or_case() {
        let host = |headers: &HeaderMap, uri: &'static str| {
            request_host(Version::HTTP_11, headers, &Uri::from_static(uri))
                .ok()
                .flatten()
                .map(Cow::into_owned)
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            "WWW.Example.com:8443".parse().expect("header"),
        );
        assert_eq!(host(&headers, "/x").as_deref(), Some("www.example.com"));
        headers.insert(header::HOST, "[::1]:8080".parse().expect("header"));
        assert_eq!(host(&headers, "/x").as_deref(), Some("[::1]"));
        headers.insert(header::HOST, "bad host".parse().expect("header"));
        assert_eq!(host(&headers, "/x"), None);
    }

    #[test]
    fn a_request_without_host_is_routed_by_its_absolute_target() {
        let none = HeaderMap::new();
        let routed = |uri: &'static str| {
            request_host(Version::HTTP_10, &none, &Uri::from_static(uri))
                .expect("HTTP/1.0 needs no Host")
                .map(Cow::into_owned)
        };
        assert_eq!(
            routed("http://Shop.Example:8080/sitemap.xml").as_deref(),
            Some("shop.example")
        );
        assert_eq!(routed("/sitemap.xml"), None);
    }
}
