//! What a request's `Host` says: whether it is valid, and the host name it
//! is routed by (see `site::directory`).

use std::borrow::Cow;

use axum::http::{HeaderMap, Uri, Version, header};

/// What is wrong with a request's `Host`, if anything (RFC 9112 §3.2): an
/// HTTP/1.1 request must carry exactly one, and any request's must be a
/// valid `host[:port]`.
pub(super) fn host_problem(version: Version, headers: &HeaderMap) -> Option<&'static str> {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if version >= Version::HTTP_11 => Some("an HTTP/1.1 request needs a Host header"),
        (None, _) => None,
        (Some(_), Some(_)) => Some("more than one Host header"),
        (Some(host), None) => {
            let valid = host.to_str().ok().and_then(host_of).is_some();
            (!valid).then_some("the Host header is not a valid host[:port]")
        }
    }
}

/// The host of a `host[:port]` (a name, an IPv4 address or a bracketed IPv6
/// one; the port, if there is one, empty or a number under 65,536), or
/// `None` if `authority` is not one. Parsed here rather than as a URI
/// authority, which allocates, for what every request asks twice.
fn host_of(authority: &str) -> Option<&str> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')? + 1;
        authority.split_at(end)
    } else {
        authority.split_at(authority.find(':').unwrap_or(authority.len()))
    };
    let port_is_valid = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.is_empty() || p.parse::<u16>().is_ok());
    (is_host(host) && port_is_valid).then_some(host)
}

/// An IPv6 literal in brackets, or a registered name or IPv4 address of the
/// characters RFC 3986 allows.
fn is_host(host: &str) -> bool {
    if let Some(inside) = host.strip_prefix('[') {
        return inside.strip_suffix(']').is_some_and(|address| {
            !address.is_empty()
                && address
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b":.".contains(&b))
        });
    }
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b))
}

/// The request's host name, lower-cased, without port: from `Host`, or from
/// an absolute request target.
pub(super) fn request_host<'a>(headers: &'a HeaderMap, uri: &'a Uri) -> Option<Cow<'a, str>> {
    let host = match headers.get(header::HOST) {
        Some(value) => host_of(value.to_str().ok()?)?,
        None => uri.authority()?.host(),
    };
    Some(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(host_problem(http11, &with(&["www.example.com"])), None);
        assert_eq!(host_problem(http11, &with(&["[::1]:8080"])), None);
        assert_eq!(host_problem(http11, &with(&["192.0.2.1:"])), None);
        assert_eq!(host_problem(http11, &with(&["[2001:db8::1]"])), None);
        assert_eq!(host_problem(Version::HTTP_10, &with(&[])), None);
        assert!(host_problem(http11, &with(&[])).is_some_and(|p| p.contains("needs")));
        assert!(host_problem(http11, &with(&["a.example", "b.example"])).is_some());
        for bad in [
            "bad host",
            "user@www.example.com",
            ":8080",
            "a.example:port",
            "a.example:70000",
            "a.example:80:80",
            "[::1",
            "[]:80",
            "[::1]x",
            "",
        ] {
            assert!(host_problem(http11, &with(&[bad])).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn hosts_are_matched_without_port_or_case() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            "WWW.Example.com:8443".parse().expect("header"),
        );
        assert_eq!(
            request_host(&headers, &Uri::from_static("/x")).as_deref(),
            Some("www.example.com")
        );
        headers.insert(header::HOST, "[::1]:8080".parse().expect("header"));
        assert_eq!(
            request_host(&headers, &Uri::from_static("/x")).as_deref(),
            Some("[::1]")
        );
        headers.insert(header::HOST, "bad host".parse().expect("header"));
        assert_eq!(request_host(&headers, &Uri::from_static("/x")), None);
    }
}
