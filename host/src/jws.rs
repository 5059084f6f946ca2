//! JSON Web Signatures (RFC 7515) with the operator's Ed25519 key (`EdDSA`, RFC 8037) over a
//! document's canonical JSON (JCS, RFC 8785): what signs the agents' A2A cards. The public
//! key is published as a JSON Web Key Set, its `kid` in every signature's protected header.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// An Ed25519 signing key and the id its public key is published under.
pub struct DocumentKey {
    signing: SigningKey,
    kid: String,
}

impl DocumentKey {
    /// Reads the key's 32-byte seed from `file`: hex or base64, as the master key is
    /// written.
    pub fn load(file: &Path) -> Result<DocumentKey, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let text = text.trim();
        let bytes = hex::decode(text)
            .ok()
            .or_else(|| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .ok_or_else(|| format!("{}: not a hex or base64 key", file.display()))?;
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("{}: an Ed25519 key is 32 bytes", file.display()))?;
        Ok(DocumentKey::from_seed(seed))
    }

    pub fn from_seed(seed: [u8; 32]) -> DocumentKey {
        let signing = SigningKey::from_bytes(&seed);
        let public = signing.verifying_key().to_bytes();
        // The key's id: the start of its public key's digest, the same on every host.
        let kid = hex::encode(&Sha256::digest(public)[..8]);
        DocumentKey { signing, kid }
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JSON Web Key (RFC 8037).
    pub fn jwk(&self) -> Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": URL_SAFE_NO_PAD.encode(self.signing.verifying_key().to_bytes()),
            "kid": self.kid,
            "use": "sig",
            "alg": "EdDSA",
        })
    }

    /// Signs `payload` (the document's canonical bytes): the protected header and the
    /// signature, base64url, of the JWS whose payload travels as the document itself.
    /// `jku` names where the key set is published.
    pub fn sign(&self, payload: &[u8], jku: &str) -> (String, String) {
        let header = json!({ "alg": "EdDSA", "kid": self.kid, "jku": jku, "typ": "JOSE" });
        let protected = URL_SAFE_NO_PAD.encode(header.to_string());
        let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(payload));
        let signature = self.signing.sign(input.as_bytes());
        (protected, URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }
}

/// A JSON document in canonical form (RFC 8785) after leaving out every empty string, list
/// and object, as A2A's SDKs canonicalize a card before they check its signatures (they
/// read it into their types first, which drops what is empty).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    if let Some(cleaned) = without_empties(value) {
        write(&cleaned, &mut out);
    }
    out
}

fn without_empties(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(without_empties).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(object) => {
            let kept: Map<String, Value> = object
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), without_empties(v)?)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => {
            // Keys in the order of their UTF-16 code units.
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write(&object[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        Value::Number(n) => out.push_str(&number(n)),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
    }
}

/// A number as ECMAScript writes it: a whole number without a fraction.
fn number(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (_, Some(u), _) => u.to_string(),
        (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
        (_, _, Some(f)) => f.to_string(),
        _ => n.to_string(),
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_and_leaves_out_what_is_empty() {
        let doc = json!({
            "b": [1, 2.0, "", []],
            "a": { "z": "", "y": {} },
            "é": "line\nbreak \u{1}",
            "c": true,
        });
        assert_eq!(
            canonical(&doc),
            "{\"b\":[1,2],\"c\":true,\"é\":\"line\\nbreak \\u0001\"}"
        );
    }

    #[test]
    fn a_signature_checks_with_the_published_key() {
        let key = DocumentKey::from_seed([7; 32]);
        let (protected, signature) = key.sign(b"{\"a\":1}", "https://example.com/jwks.json");
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&protected).unwrap()).unwrap();
        assert_eq!(header["kid"], key.kid());
        let x = URL_SAFE_NO_PAD.decode(key.jwk()["x"].as_str().unwrap()).unwrap();
        let public = ed25519_dalek::VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap();
        let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(b"{\"a\":1}"));
        let signature = ed25519_dalek::Signature::from_slice(&URL_SAFE_NO_PAD.decode(signature).unwrap()).unwrap();
        assert!(public.verify_strict(input.as_bytes(), &signature).is_ok());
        assert!(public.verify_strict(b"another", &signature).is_err());
    }
}
