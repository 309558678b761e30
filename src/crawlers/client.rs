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
        let hops = if headers.contains_key(FORWARDED) {
            forwarded_for(headers)
        } else {
            x_forwarded_for(headers)
        };
        for hop in hops.into_iter().rev() {
            // An obfuscated or unknown hop ends what can be known.
            let Some(address) = hop else { break };
            client = address.to_canonical();
            if !self.trusts(client) {
                break;
            }
        }
        client
    }
}

/// The `for=` of each element of every `Forwarded` header, in order (RFC
/// 7239): `None` for one that names no address.
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let mut hops = Vec::new();
    for value in headers.get_all(FORWARDED) {
        let Ok(value) = value.to_str() else {
            hops.push(None);
            continue;
        };
        for element in value.split(',') {
            let node = element.split(';').find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| value.trim())
            });
            hops.push(node.and_then(node_address));
        }
    }
    hops
}

/// The address of a `Forwarded` node: `192.0.2.1`, `"192.0.2.1:80"`,
/// `"[2001:db8::1]:443"`.
fn node_address(node: &str) -> Option<IpAddr> {
    let node = node.trim_matches('"');
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    node.parse()
        .ok()
        .or_else(|| node.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// Each address of every `X-Forwarded-For` header, in order.
fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .flat_map(|value| {
            value
                .to_str()
                .unwrap_or("?")
                .split(',')
                .map(|hop| {
                    let hop = hop.trim();
                    hop.parse()
                        .ok()
                        .or_else(|| hop.parse::<SocketAddr>().ok().map(|a| a.ip()))
                })
                .collect::<Vec<_>>()
        })
        .collect()
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
