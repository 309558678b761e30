//! Content negotiation for `.xml` documents: which compression the client
//! accepts, from `Accept-Encoding` (RFC 9110 §12.5.3).

use axum::http::{HeaderMap, header};

use crate::pages::codec::Codec;

/// Our preference among encodings a client accepts equally: zstd and brotli
/// make smaller bodies than gzip, zstd at the least CPU.
const PREFERENCE: [Codec; 3] = [Codec::Zstd, Codec::Brotli, Codec::Gzip];

/// The encoding to send: the accepted one with the highest q-value, ties
/// broken by [`PREFERENCE`]; identity when none is accepted.
pub(super) fn negotiate(request: &HeaderMap) -> Codec {
    let Some(accept) = request
        .get(header::ACCEPT_ENCODING)
        .and_then(|value| value.to_str().ok())
    else {
        return Codec::Identity;
    };
    let mut wildcard = None;
    let mut weights = [None; PREFERENCE.len()];
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let token = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .or_else(|| p.trim().strip_prefix("Q="))
            })
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if token == "*" {
            wildcard = Some(q);
        } else if let Some(i) = PREFERENCE.iter().position(|c| c.token() == token) {
            weights[i] = Some(q);
        }
    }
    PREFERENCE
        .iter()
        .zip(weights)
        .filter_map(|(codec, q)| q.or(wildcard).map(|q| (*codec, q)))
        .filter(|(_, q)| *q > 0.0)
        .fold(None, |best: Option<(Codec, f32)>, (codec, q)| match best {
            Some((_, best_q)) if best_q >= q => best,
            _ => Some((codec, q)),
        })
        .map_or(Codec::Identity, |(codec, _)| codec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> Codec {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, value.parse().expect("header"));
        negotiate(&headers)
    }

    #[test]
    fn picks_the_best_accepted_encoding() {
        assert_eq!(negotiate(&HeaderMap::new()), Codec::Identity);
        assert_eq!(accept("gzip"), Codec::Gzip);
        assert_eq!(accept("gzip, deflate, br"), Codec::Brotli);
        assert_eq!(accept("gzip, deflate, br, zstd"), Codec::Zstd);
        assert_eq!(accept("br;q=0.5, gzip;q=0.9"), Codec::Gzip);
        assert_eq!(accept("GZIP;Q=1"), Codec::Gzip);
        assert_eq!(accept("*"), Codec::Zstd);
        assert_eq!(accept("*;q=0.1, gzip;q=0.5"), Codec::Gzip);
        assert_eq!(accept("zstd;q=0, *"), Codec::Brotli);
        assert_eq!(accept("deflate, compress"), Codec::Identity);
        assert_eq!(accept("identity"), Codec::Identity);
        assert_eq!(accept("gzip;q=0"), Codec::Identity);
    }
}
