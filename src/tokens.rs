//! Bearer tokens of the write API: minted by `sitemapd token`, configured
//! only as SHA-256 digests, checked in constant time.
//!
//! A token is 256 random bits, so a plain digest is as strong as a slow
//! password hash would be and costs nothing per request; and a leaked
//! configuration file gives no token away.

use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

/// How a configured digest is written: `sha256:` and 64 hex digits.
const DIGEST_PREFIX: &str = "sha256:";
/// Marks a string as a sitemapd token, for secret scanners and people.
const TOKEN_PREFIX: &str = "smd_";

/// The digests of the tokens the API admits.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    digests: Vec<[u8; 32]>,
}

impl Tokens {
    /// From configured `sha256:<hex>` strings; `Err` names the first bad one.
    pub(crate) fn from_hashes(hashes: &[String]) -> Result<Tokens, String> {
        let digests = hashes
            .iter()
            .map(|hash| parse_digest(hash).ok_or_else(|| hash.clone()))
            .collect::<Result<_, _>>()?;
        Ok(Tokens { digests })
    }

    /// Whether `presented` is one of the tokens. Every digest is compared,
    /// each in constant time, so timing tells nothing of how close a guess
    /// came or which token matched.
    pub(crate) fn admits(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let matched = self
            .digests
            .iter()
            .fold(Choice::from(0), |found, known| found | known.ct_eq(&digest));
        matched.into()
    }
}

/// A new random token and the digest to configure for it.
pub fn mint() -> Result<(String, String), getrandom::Error> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)?;
    let token = format!("{TOKEN_PREFIX}{}", hex(&secret));
    let hash = hash_of(&token);
    Ok((token, hash))
}

/// The configuration form of `token`'s digest.
pub fn hash_of(token: &str) -> String {
    format!("{DIGEST_PREFIX}{}", hex(&Sha256::digest(token.as_bytes())))
}

fn parse_digest(hash: &str) -> Option<[u8; 32]> {
    let digits = hash.strip_prefix(DIGEST_PREFIX)?.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(digest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_is_admitted_by_its_hash_only() {
        let (token, hash) = mint().expect("random bytes");
        let (other, _) = mint().expect("random bytes");
        assert!(token.starts_with("smd_") && token.len() == 68);
        let tokens = Tokens::from_hashes(&[hash]).expect("valid hash");
        assert!(tokens.admits(&token));
        assert!(!tokens.admits(&other));
        assert!(!tokens.admits(""));
    }

    #[test]
    fn malformed_hashes_are_named() {
        let good = hash_of("x");
        for bad in [
            "smd_abc".to_owned(),
            "sha256:".to_owned(),
            good.to_uppercase(),
            format!("{good}00"),
            good.replace('a', "g"),
        ] {
            if bad == good {
                continue;
            }
            assert_eq!(
                Tokens::from_hashes(&[good.clone(), bad.clone()]).expect_err("a malformed hash"),
                bad
            );
        }
    }
}
