//! The recursion guard's marker. Every HTTP request a plugin makes carries
//! `x-agent-host-origin: v1.<unix seconds>.<mac>`, an HMAC-SHA256 (under a key derived from
//! the master key) of its first two parts. A chat request that comes back bearing a valid,
//! recent marker was caused by one of our own plugins (webhook → chat), so its tools are
//! forced off: a webhook → chat → tool → webhook loop cannot drain credits. A third party
//! that sees the marker can only replay it to switch tools off, never on.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const HEADER: &str = "x-agent-host-origin";
/// How long a marker counts as fresh.
const MAX_AGE_SECS: i64 = 600;

#[derive(Clone)]
pub struct MarkerKey([u8; 32]);

impl std::fmt::Debug for MarkerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MarkerKey(..)")
    }
}

impl MarkerKey {
    /// Derived from the master key, so it survives restarts and needs no storage.
    pub fn derive(master: &[u8; 32]) -> MarkerKey {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(master).expect("HMAC takes any key length");
        mac.update(b"agent-host recursion marker v1");
        MarkerKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self, payload: &str) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(payload.as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..16])
    }

    pub fn sign(&self, now_secs: i64) -> String {
        let payload = format!("v1.{now_secs}");
        format!("{payload}.{}", self.mac(&payload))
    }

    /// True for a marker this server signed within the last ten minutes.
    pub fn verify(&self, value: &str, now_secs: i64) -> bool {
        let Some((payload, mac)) = value.trim().rsplit_once('.') else {
            return false;
        };
        let Some(secs) = payload.strip_prefix("v1.").and_then(|s| s.parse::<i64>().ok()) else {
            return false;
        };
        let fresh = (now_secs - MAX_AGE_SECS..=now_secs + 60).contains(&secs);
        let expected = self.mac(payload);
        fresh && subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), mac.as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_and_verifies_only_fresh_own_markers() {
        let key = MarkerKey::derive(&[7u8; 32]);
        let marker = key.sign(1_000_000);
        assert!(key.verify(&marker, 1_000_000));
        assert!(key.verify(&marker, 1_000_000 + 599));
        assert!(!key.verify(&marker, 1_000_000 + 601), "too old");
        assert!(
            !MarkerKey::derive(&[8u8; 32]).verify(&marker, 1_000_000),
            "another server's key"
        );
        assert!(
            !key.verify(&marker.replace("v1.1000000", "v1.1000001"), 1_000_001),
            "tampered time"
        );
        assert!(!key.verify("garbage", 1_000_000));
        assert!(!key.verify("v1.x.abc", 1_000_000));
    }
}
