//! The master key that encrypts secrets at rest (wallet keys, bot and social tokens).
//! It comes from `AGENT_HOST_MASTER_KEY` or from `DATA_DIR/master.key`, created 0600 on
//! first use (`key_file`). The type never prints its bytes.
//!
//! `seal`/`open`: XChaCha20-Poly1305 with a fresh random 192-bit nonce per record, and
//! associated data naming what the secret belongs to (e.g. `agent:<id>:chatapp`), so a
//! record copied to another agent or purpose fails to open, like a tampered one.

pub mod key_file;

use std::fmt;
use std::path::PathBuf;

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

pub use key_file::{KeySource, MASTER_KEY_FILE};

pub struct MasterKey([u8; 32]);

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    #[error("AGENT_HOST_MASTER_KEY must be 32 bytes as 64 hex digits or base64")]
    BadEnv,
    #[error("{0}: the master key file must hold 32 bytes as 64 hex digits")]
    BadFile(PathBuf),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{0} is missing, but this data dir has held a master key (a master.key.next or master.key.retired-* file is there): put the key back rather than start with a new one, which could not open the secrets"
    )]
    Missing(PathBuf),
}

impl MasterKey {
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A new random key.
    pub fn generate() -> MasterKey {
        let mut key = [0u8; 32];
        crate::random::fill(&mut key);
        MasterKey(key)
    }
}

/// A key as an operator writes it: 64 hex digits, or base64 of 32 bytes.
pub fn decode(text: &str) -> Option<MasterKey> {
    let bytes = if text.len() == 64 {
        hex::decode(text).ok()?
    } else {
        base64::engine::general_purpose::STANDARD.decode(text).ok()?
    };
    Some(MasterKey(bytes.try_into().ok()?))
}

/// Layout version of a sealed record: `[1][24-byte nonce][ciphertext + 16-byte tag]`.
const SEALED_V1: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a stored secret could not be decrypted: the master key is not the one it was sealed with, or the record was altered"
)]
pub struct OpenError;

fn agent_purpose(agent_id: &str, kind: &str) -> String {
    format!("agent:{agent_id}:{kind}")
}

impl MasterKey {
    /// Seals `secret` as the agent's `kind` secret (a bot token, a wallet key): the agent
    /// and kind are the associated data, so a record moved to another agent or kind does
    /// not open.
    pub fn seal_for_agent(&self, agent_id: &str, kind: &str, secret: &[u8]) -> Vec<u8> {
        self.seal(&agent_purpose(agent_id, kind), secret)
    }

    /// Opens what [`MasterKey::seal_for_agent`] made for the same agent and kind.
    pub fn open_for_agent(&self, agent_id: &str, kind: &str, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        self.open(&agent_purpose(agent_id, kind), sealed)
    }

    pub fn seal(&self, associated: &str, plaintext: &[u8]) -> Vec<u8> {
        let cipher = XChaCha20Poly1305::new(self.0.as_slice().into());
        let mut nonce = [0u8; 24];
        crate::random::fill(&mut nonce);
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: associated.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 encryption cannot fail for in-memory data");
        let mut out = Vec::with_capacity(1 + 24 + sealed.len());
        out.push(SEALED_V1);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    pub fn open(&self, associated: &str, record: &[u8]) -> Result<Vec<u8>, OpenError> {
        if record.len() < 1 + 24 + 16 || record[0] != SEALED_V1 {
            return Err(OpenError);
        }
        let cipher = XChaCha20Poly1305::new(self.0.as_slice().into());
        cipher
            .decrypt(
                XNonce::from_slice(&record[1..25]),
                Payload {
                    msg: &record[25..],
                    aad: associated.as_bytes(),
                },
            )
            .map_err(|_| OpenError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_open_only_with_the_same_key_and_purpose() {
        let key = MasterKey([3u8; 32]);
        let sealed = key.seal("agent:a1:chatapp", b"123:bot-token");
        assert_ne!(&sealed[25..], b"123:bot-token", "not stored in the clear");
        assert_eq!(key.open("agent:a1:chatapp", &sealed).unwrap(), b"123:bot-token");
        assert_ne!(
            key.seal("agent:a1:chatapp", b"x"),
            key.seal("agent:a1:chatapp", b"x"),
            "fresh nonce each time"
        );
        assert_eq!(
            key.open("agent:a2:chatapp", &sealed),
            Err(OpenError),
            "bound to its agent"
        );
        assert_eq!(
            MasterKey([4u8; 32]).open("agent:a1:chatapp", &sealed),
            Err(OpenError),
            "wrong master key"
        );
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(key.open("agent:a1:chatapp", &tampered), Err(OpenError));
        assert_eq!(key.open("agent:a1:chatapp", &sealed[..10]), Err(OpenError));
    }
}
