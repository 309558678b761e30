//! The client's address: the peer's, or behind a trusted proxy, the one
//! its `Forwarded` or `X-Forwarded-For` header names.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use axum::http::header::FORWARDED;
use ipnet::IpNet;

const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The proxies whose forwarding headers are believed (`trusted_proxies`).
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub(crate) fn new(networks: Vec<IpNet>) -> Self {
        TrustedProxies(networks)
    }

    fn trusts(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|network| network.contains(&address))
    }

    /// The client of a request from `peer`: while the hop before is a
    /// trusted proxy, the address it says it forwarded for, read from the
    /// right (the nearest hop first). Headers from a peer not trusted are
    /// ignored, so no client can name its own address.
    pub(crate) fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.ip().to_canonical();
        if !self.trusts(client) {
            return client;
        }
        // Each header's hops, the last header first, each read from its
        // end: the nearest hop first, with nothing collected.
        let forwarded = headers.contains_key(FORWARDED);
        let name = if forwarded {
            FORWARDED.as_str()
        } else {
            X_FORWARDED_FOR
        };
        for value in headers.get_all(name).iter().rev() {
            let Ok(value) = value.to_str() else {
                return client;
            };
            for hop in value.rsplit(',') {
                let address = if forwarded {
                    forwarded_for(hop)
                } else {
                    address_of(hop.trim())
                };
                // An obfuscated or unknown hop ends what can be known.
                let Some(address) = address else {
                    return client;
                };
                client = address.to_canonical();
                if !self.trusts(client) {
                    return client;
                }
            }
        }
        client
    }
}

/// The `for=` of one element of a `Forwarded` header (RFC 7239), when it
/// names an address.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let node = element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| value.trim())
    })?;
    // `192.0.2.1`, `"192.0.2.1:80"`, `"[2001:db8::1]:443"`
    let node = node.trim_matches('"');
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    address_of(node)
}

/// An address, with or without a port.
fn address_of(text: &str) -> Option<IpAddr> {
    text.parse()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("test input"));
        }
        map
    }

    fn proxies(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            nets.iter()
                .map(|n| n.parse().expect("test input"))
                .collect(),
        )
    }

    fn peer(address: &str) -> SocketAddr {
        SocketAddr::new(address.parse().expect("test input"), 40000)
    }

    #[test]
    fn only_a_trusted_peer_names_the_client() {
        let trusted = proxies(&["10.0.0.0/8", "::1/128"]);
        let forwarded = headers(&[("x-forwarded-for", "66.249.66.1")]);
        assert_eq!(
            trusted.client(peer("10.1.2.3"), &forwarded),
            "66.249.66.1".parse::<IpAddr>().expect("test input")
        );
        assert_eq!(
            trusted.client(peer("203.0.113.9"), &forwarded),
            "203.0.113.9".parse::<IpAddr>().expect("test input")
        );
        assert_eq!(
            proxies(&[]).client(peer("10.1.2.3"), &forwarded),
            "10.1.2.3".parse::<IpAddr>().expect("test input")
        );
        assert_eq!(
            trusted.client(peer("::1"), &forwarded),
            "66.249.66.1".parse::<IpAddr>().expect("test input")
        );
    }

    #[test]
    fn the_nearest_untrusted_hop_is_the_client() {
        let trusted = proxies(&["10.0.0.0/8"]);
        // The client put a made-up address first; the proxies appended.
        let chain = headers(&[
            ("x-forwarded-for", "1.2.3.4, 66.249.66.1"),
            ("x-forwarded-for", "10.0.0.7"),
        ]);
        assert_eq!(
            trusted.client(peer("10.0.0.2"), &chain),
            "66.249.66.1".parse::<IpAddr>().expect("test input")
        );
        let garbage = headers(&[("x-forwarded-for", "1.2.3.4, nonsense")]);
        assert_eq!(
            trusted.client(peer("10.0.0.2"), &garbage),
            "10.0.0.2".parse::<IpAddr>().expect("test input")
        );
    }

    #[test]
    fn forwarded_is_read_as_rfc_7239_writes_it() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let cases = [
            ("for=66.249.66.1", "66.249.66.1"),
            ("For=\"66.249.66.1:4711\";proto=https", "66.249.66.1"),
            ("for=\"[2001:4860:4801:10::1]:443\"", "2001:4860:4801:10::1"),
            (
                "for=192.0.2.60;proto=http;by=203.0.113.43, for=10.0.0.9",
                "192.0.2.60",
            ),
            ("for=unknown", "10.0.0.2"),
            ("for=_hidden, for=66.249.66.1", "66.249.66.1"),
        ];
        for (value, client) in cases {
            let forwarded = headers(&[("forwarded", value), ("x-forwarded-for", "1.1.1.1")]);
            assert_eq!(
                trusted.client(peer("10.0.0.2"), &forwarded),
                client.parse::<IpAddr>().expect("test input"),
                "{value}"
            );
        }
    }
}
