//! What a request's `Host` says: whether it is valid, and the host name it
//! is routed by (see `site::directory`).

use axum::http::{HeaderMap, Uri, Version, header, uri::Authority};

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
            let valid = host
                .to_str()
                .ok()
                .filter(|text| !text.contains('@'))
                .and_then(|text| text.parse::<Authority>().ok())
                .is_some_and(|authority| {
                    let host = authority.host();
                    let port = &authority.as_str()[host.len()..];
                    is_host(host)
                        && (port.is_empty()
                            || port
                                .strip_prefix(':')
                                .is_some_and(|p| p.is_empty() || p.parse::<u16>().is_ok()))
                });
            (!valid).then_some("the Host header is not a valid host[:port]")
        }
    }
}

/// An IP literal in brackets, or a registered name of the characters RFC 3986
/// allows.
fn is_host(host: &str) -> bool {
    if host.starts_with('[') {
        return host.ends_with(']');
    }
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b))
}

/// The request's host name, lower-cased, without port: from `Host`, or from
/// an absolute request target.
pub(super) fn request_host(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let authority = match headers.get(header::HOST) {
        Some(value) => value.to_str().ok()?.parse::<Authority>().ok()?,
        None => uri.authority()?.clone(),
    };
    Some(authority.host().to_ascii_lowercase())
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
        assert_eq!(host_problem(Version::HTTP_10, &with(&[])), None);
        assert!(host_problem(http11, &with(&[])).is_some_and(|p| p.contains("needs")));
        assert!(host_problem(http11, &with(&["a.example", "b.example"])).is_some());
        for bad in [
            "bad host",
            "user@www.example.com",
            ":8080",
            "a.example:port",
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
