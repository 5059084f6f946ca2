//! PKCE (RFC 7636), `S256` only: the code's challenge is the verifier's SHA-256, base64url
//! without padding. A few lines over `sha2` and `base64`, which the host already uses for
//! every other hash; the OAuth crates that offer it (`oauth2`, `openidconnect`) are
//! clients' and would bring an HTTP stack to check one hash.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

fn unreserved(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Whether `challenge` can be an S256 challenge: 43 base64url characters (32 bytes).
pub fn is_challenge(challenge: &str) -> bool {
    challenge.len() == 43 && URL_SAFE_NO_PAD.decode(challenge).is_ok_and(|bytes| bytes.len() == 32)
}

/// Whether `verifier` is well formed (43 to 128 unreserved characters) and hashes to
/// `challenge`.
pub fn verifies(verifier: &str, challenge: &str) -> bool {
    if !(43..=128).contains(&verifier.len()) || !unreserved(verifier) {
        return false;
    }
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    computed.as_bytes().ct_eq(challenge.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636, appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn the_rfc_example_verifies() {
        assert!(is_challenge(CHALLENGE));
        assert!(verifies(VERIFIER, CHALLENGE));
    }

    #[test]
    fn anything_else_does_not() {
        let mut other = VERIFIER.to_string();
        other.replace_range(0..1, "e");
        assert!(!verifies(&other, CHALLENGE), "another verifier");
        assert!(!verifies(CHALLENGE, CHALLENGE), "the challenge itself");
        assert!(!verifies("short", CHALLENGE));
        assert!(!verifies(&format!("{VERIFIER} "), CHALLENGE), "not unreserved");
        assert!(!verifies(&"a".repeat(129), CHALLENGE), "too long");
        assert!(!is_challenge("plain-text-challenge"));
        assert!(!is_challenge(&format!("{CHALLENGE}=")));
    }
}
