//! Standard Webhooks signatures: HMAC-SHA256 over `{id}.{timestamp}.{body}` with the
//! endpoint's secret, sent as `webhook-signature: v1,<base64>`. The receiver checks it with
//! the same secret (shown to the owner as `whsec_<base64>`); docs/webhooks.md says how.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a new endpoint's secret (the scheme asks for at least 24).
pub const SECRET_BYTES: usize = 32;

/// The secret as the owner copies it.
pub fn show_secret(secret: &[u8]) -> String {
    format!("whsec_{}", STANDARD.encode(secret))
}

/// The `webhook-signature` value for one attempt: `timestamp` is the attempt's (Unix
/// seconds), so a retry is signed anew over the same body.
pub fn signature(secret: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(format!("{msg_id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's own example.
    #[test]
    fn signs_the_specifications_example() {
        let secret = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signed = signature(
            &secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!(show_secret(&secret), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    }
}
