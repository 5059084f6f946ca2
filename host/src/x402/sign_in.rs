//! Sign-in with a wallet: x402's `sign-in-with-x` extension (CAIP-122). A 402 offers a
//! challenge (domain, URI, nonce, time); the client signs it as a Sign-In with Ethereum
//! message (EIP-4361, checked by EIP-191 recovery or by the wallet contract) or a Sign-In
//! with Solana one (ed25519), and sends it in the `SIGN-IN-WITH-X` header (over MCP, in
//! `_meta`). Pure code: checking that the wallet may use the command without paying, and
//! asking a wallet contract, are the service's.
//!
//! The nonce is issued without being stored: it carries a MAC, under a key derived from
//! the master key, of its random half, the challenge's time and its URI, so any host can
//! tell a nonce it issued for this URI at that time. The service records a nonce when it
//! lets a sign-in in, so each one is used once.

use alloy::primitives::{Address, B256, eip191_hash_message};
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::chains::smart_wallets::PayerSignature;
use crate::domain::Network;

/// The extension's key in `extensions`, and its HTTP header.
pub const SIGN_IN_WITH_X: &str = "sign-in-with-x";

/// How long a challenge may be answered after it was issued (the reference's default).
pub const MAX_AGE_MS: i64 = 5 * 60 * 1000;

/// Largest header (or `_meta` entry) read: a smart wallet's signature is at most 8 KiB.
const MAX_PAYLOAD_BYTES: usize = 16 * 1024;

const STATEMENT: &str = "Sign in with the wallet that paid, to use what it bought without paying again.";

/// Issues and recognises this service's nonces.
#[derive(Clone)]
pub struct NonceKey([u8; 32]);

impl std::fmt::Debug for NonceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NonceKey(..)")
    }
}

impl NonceKey {
    /// Derived from the master key, so every host issues and checks the same nonces.
    pub fn derive(master: &[u8; 32]) -> NonceKey {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(master).expect("HMAC takes any key length");
        mac.update(b"agent-host sign-in-with-x nonce v1");
        NonceKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self, random: &str, issued_at: &str, uri: &str) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(format!("{random}|{issued_at}|{uri}").as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..8])
    }

    /// 32 hex characters: 16 random, then 16 of the MAC.
    fn issue(&self, issued_at: &str, uri: &str) -> String {
        let mut random = [0u8; 8];
        crate::random::fill(&mut random);
        let random = hex::encode(random);
        let mac = self.mac(&random, issued_at, uri);
        format!("{random}{mac}")
    }

    fn issued(&self, nonce: &str, issued_at: &str, uri: &str) -> bool {
        if nonce.len() != 32 || !nonce.is_ascii() {
            return false;
        }
        let (random, mac) = nonce.split_at(16);
        subtle::ConstantTimeEq::ct_eq(self.mac(random, issued_at, uri).as_bytes(), mac.as_bytes()).into()
    }
}

/// Where a sign-in is asked for: this service's public origin, the address (or MCP
/// endpoint) asked, and the resource it is for (the address itself, or `mcp://tool/...`).
#[derive(Debug, Clone)]
pub struct Place<'a> {
    /// The public origin's `host[:port]`.
    pub domain: &'a str,
    pub uri: &'a str,
    pub resource: &'a str,
}

/// A chain a wallet may sign in on: its x402 network and CAIP-2 id.
#[derive(Debug, Clone)]
pub struct Chain {
    pub network: Network,
    pub id: String,
}

/// `extensions["sign-in-with-x"]` of a 402: a fresh challenge for `place`, answerable on
/// `chains`.
pub fn challenge(key: &NonceKey, place: &Place, chains: &[Chain], now_ms: i64) -> Value {
    let issued_at = crate::clock::iso(now_ms);
    let nonce = key.issue(&issued_at, place.uri);
    let supported: Vec<Value> = chains
        .iter()
        .map(|chain| json!({ "chainId": chain.id, "type": signature_type(chain.network) }))
        .collect();
    json!({
        "info": {
            "domain": place.domain,
            "uri": place.uri,
            "version": "1",
            "nonce": nonce,
            "issuedAt": issued_at,
            "expirationTime": crate::clock::iso(now_ms + MAX_AGE_MS),
            "statement": STATEMENT,
            "resources": [place.resource],
        },
        "supportedChains": supported,
        "schema": schema(),
    })
}

fn signature_type(network: Network) -> &'static str {
    match network {
        Network::Base => "eip191",
        Network::Solana => "ed25519",
    }
}

/// A signed challenge as a client sends it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignIn {
    pub domain: String,
    pub address: String,
    #[serde(default)]
    pub statement: Option<String>,
    pub uri: String,
    pub version: String,
    pub chain_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub nonce: String,
    pub issued_at: String,
    #[serde(default)]
    pub expiration_time: Option<String>,
    #[serde(default)]
    pub not_before: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub resources: Option<Vec<String>>,
    pub signature: String,
}

impl SignIn {
    /// The header's value: base64 of the JSON object.
    pub fn from_header(text: &str) -> Result<SignIn, String> {
        if text.len() > MAX_PAYLOAD_BYTES * 4 / 3 + 4 {
            return Err(format!("the sign-in is over {MAX_PAYLOAD_BYTES} bytes"));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| "the sign-in is not base64".to_string())?;
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|_| "the sign-in is not base64 of JSON".to_string())?;
        SignIn::from_value(value)
    }

    /// An MCP `_meta` entry: the object itself, or the header's base64 of it.
    pub fn from_value(value: Value) -> Result<SignIn, String> {
        match value {
            Value::String(text) => SignIn::from_header(&text),
            value if value.to_string().len() > MAX_PAYLOAD_BYTES => {
                Err(format!("the sign-in is over {MAX_PAYLOAD_BYTES} bytes"))
            }
            value => serde_json::from_value(value).map_err(|e| format!("the sign-in is not one: {e}")),
        }
    }
}

/// A sign-in whose challenge is ours, for this place and still fresh, and whose signature
/// is the wallet's or may be (a contract wallet's is for the chain to say).
#[derive(Debug, Clone)]
pub struct Checked {
    pub network: Network,
    /// As payments name it: checksummed on Base, base58 on Solana.
    pub wallet: String,
    pub nonce: String,
    /// `Some` when the signature is not a key's: the wallet contract must accept `digest`.
    pub ask_wallet: Option<WalletCheck>,
}

#[derive(Debug, Clone)]
pub struct WalletCheck {
    pub wallet: Address,
    pub digest: B256,
    pub signature: PayerSignature,
}

/// Checks everything that needs no chain: the challenge (ours, for `place`, in time, on
/// one of `chains`), the message rebuilt from it, and the signature.
pub fn check(
    key: &NonceKey,
    sign_in: &SignIn,
    place: &Place,
    chains: &[Chain],
    now_ms: i64,
) -> Result<Checked, String> {
    if sign_in.domain != place.domain {
        return Err(format!("it is for {}, not {}", sign_in.domain, place.domain));
    }
    if sign_in.uri != place.uri {
        return Err(format!("it is for {}, not {}", sign_in.uri, place.uri));
    }
    if !sign_in.resources.iter().flatten().any(|r| r == place.resource) {
        return Err(format!("its resources do not name {}", place.resource));
    }
    if sign_in.version != "1" {
        return Err(format!("version {} is not 1", sign_in.version));
    }
    let issued_at = crate::clock::parse_iso(&sign_in.issued_at).ok_or("its issuedAt is not an RFC 3339 time")?;
    if !key.issued(&sign_in.nonce, &sign_in.issued_at, &sign_in.uri) {
        return Err("its nonce was not issued here for this address at that time".into());
    }
    if now_ms - issued_at > MAX_AGE_MS {
        return Err(format!(
            "the challenge is over {} minutes old: ask again for a fresh one",
            MAX_AGE_MS / 60_000
        ));
    }
    let time = |field: &str, text: &Option<String>| -> Result<Option<i64>, String> {
        text.as_deref()
            .map(|t| crate::clock::parse_iso(t).ok_or(format!("its {field} is not an RFC 3339 time")))
            .transpose()
    };
    if time("expirationTime", &sign_in.expiration_time)?.is_some_and(|at| at <= now_ms) {
        return Err("it has expired".into());
    }
    if time("notBefore", &sign_in.not_before)?.is_some_and(|at| at > now_ms) {
        return Err("it is not valid yet (notBefore)".into());
    }
    let chain = chains
        .iter()
        .find(|chain| chain.id == sign_in.chain_id)
        .ok_or(format!("chain {} is not offered here", sign_in.chain_id))?;
    if sign_in.kind != signature_type(chain.network) {
        return Err(format!(
            "type {} is not {} on {}",
            sign_in.kind,
            signature_type(chain.network),
            chain.id
        ));
    }
    match chain.network {
        Network::Solana => check_solana(sign_in, chain),
        Network::Base => check_evm(sign_in, chain),
    }
}

fn check_solana(sign_in: &SignIn, chain: &Chain) -> Result<Checked, String> {
    let key: [u8; 32] = bs58::decode(&sign_in.address)
        .into_vec()
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or("its address is not a base58 ed25519 key")?;
    let signature: [u8; 64] = bs58::decode(&sign_in.signature)
        .into_vec()
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or("its signature is not 64 bytes of base58")?;
    let message = siws_message(sign_in, chain);
    // Strict verification: a small-order key (which any signature could pass under a
    // lenient check) or a non-canonical signature is refused.
    let key = ed25519_dalek::VerifyingKey::from_bytes(&key).map_err(|_| "its address is not an ed25519 key")?;
    let signature = ed25519_dalek::Signature::from_bytes(&signature);
    if key.is_weak() || key.verify_strict(message.as_bytes(), &signature).is_err() {
        return Err("the signature is not the wallet's for this message".into());
    }
    Ok(Checked {
        network: Network::Solana,
        wallet: sign_in.address.clone(),
        nonce: sign_in.nonce.clone(),
        ask_wallet: None,
    })
}

fn check_evm(sign_in: &SignIn, chain: &Chain) -> Result<Checked, String> {
    let wallet: Address = sign_in
        .address
        .parse()
        .map_err(|_| "its address is not an EVM address")?;
    let bytes = hex::decode(sign_in.signature.trim_start_matches("0x")).map_err(|_| "its signature is not hex")?;
    let signature = PayerSignature::parse(&bytes).map_err(|e| format!("its signature cannot be read: {e}"))?;
    let digest = eip191_hash_message(siwe_message(sign_in, chain, wallet).as_bytes());
    let recovered = match &signature {
        PayerSignature::Ecdsa { signature, .. } => signature.recover_address_from_prehash(&digest).ok(),
        _ => None,
    };
    Ok(Checked {
        network: Network::Base,
        wallet: wallet.to_checksum(None),
        nonce: sign_in.nonce.clone(),
        ask_wallet: (recovered != Some(wallet)).then_some(WalletCheck {
            wallet,
            digest,
            signature,
        }),
    })
}

/// The message a wallet signs for `sign_in` on `chain`, as the extension's client writes
/// it: what a client (or a benchmark) signs.
pub fn message_to_sign(sign_in: &SignIn, chain: &Chain) -> Result<String, String> {
    match chain.network {
        Network::Solana => Ok(siws_message(sign_in, chain)),
        Network::Base => {
            let wallet: Address = sign_in
                .address
                .parse()
                .map_err(|_| "its address is not an EVM address")?;
            Ok(siwe_message(sign_in, chain, wallet))
        }
    }
}

/// EIP-4361, as the extension's client writes it (the address checksummed, the chain id
/// as a number).
fn siwe_message(sign_in: &SignIn, chain: &Chain, wallet: Address) -> String {
    let chain_id = chain.id.trim_start_matches("eip155:");
    let mut text = format!(
        "{} wants you to sign in with your Ethereum account:\n{}\n\n",
        sign_in.domain,
        wallet.to_checksum(None)
    );
    match &sign_in.statement {
        Some(statement) => text.push_str(&format!("{statement}\n\n")),
        None => text.push('\n'),
    }
    text.push_str(&fields(sign_in, chain_id));
    text
}

/// Sign-In with Solana, as the extension's client writes it.
fn siws_message(sign_in: &SignIn, chain: &Chain) -> String {
    let reference = chain.id.split_once(':').map(|(_, r)| r).unwrap_or_default();
    let mut text = format!(
        "{} wants you to sign in with your Solana account:\n{}\n\n",
        sign_in.domain, sign_in.address
    );
    if let Some(statement) = &sign_in.statement {
        text.push_str(&format!("{statement}\n\n"));
    }
    text.push_str(&fields(sign_in, reference));
    text
}

/// The lines both messages share, from `URI:` on.
fn fields(sign_in: &SignIn, chain_id: &str) -> String {
    let mut lines = vec![
        format!("URI: {}", sign_in.uri),
        format!("Version: {}", sign_in.version),
        format!("Chain ID: {chain_id}"),
        format!("Nonce: {}", sign_in.nonce),
        format!("Issued At: {}", sign_in.issued_at),
    ];
    if let Some(at) = &sign_in.expiration_time {
        lines.push(format!("Expiration Time: {at}"));
    }
    if let Some(at) = &sign_in.not_before {
        lines.push(format!("Not Before: {at}"));
    }
    if let Some(id) = &sign_in.request_id {
        lines.push(format!("Request ID: {id}"));
    }
    if let Some(resources) = sign_in.resources.as_ref().filter(|r| !r.is_empty()) {
        lines.push("Resources:".into());
        lines.extend(resources.iter().map(|r| format!("- {r}")));
    }
    lines.join("\n")
}

fn schema() -> Value {
    let text = json!({ "type": "string" });
    let time = json!({ "type": "string", "format": "date-time" });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "domain": text, "address": text, "statement": text,
            "uri": { "type": "string", "format": "uri" },
            "version": text, "chainId": text, "type": text, "nonce": text,
            "issuedAt": time, "expirationTime": time, "notBefore": time, "requestId": text,
            "resources": { "type": "array", "items": { "type": "string", "format": "uri" } },
            "signature": text,
        },
        "required": ["domain", "address", "uri", "version", "chainId", "type", "nonce", "issuedAt", "signature"],
    })
}

#[cfg(test)]
mod tests {
    use alloy::signers::SignerSync;
    use alloy::signers::local::PrivateKeySigner;
    use solana_keypair::Keypair;
    use solana_signer::Signer;

    use super::*;

    const NOW: i64 = 1_796_000_000_000;

    fn place() -> Place<'static> {
        Place {
            domain: "agents.example",
            uri: "https://agents.example/x402/base/agent_1",
            resource: "https://agents.example/x402/base/agent_1",
        }
    }

    fn chains() -> Vec<Chain> {
        vec![
            Chain {
                network: Network::Base,
                id: "eip155:8453".into(),
            },
            Chain {
                network: Network::Solana,
                id: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp".into(),
            },
        ]
    }

    /// What a client echoes of the challenge, before it signs.
    fn answered(key: &NonceKey, chain: &str, kind: &str, address: &str) -> SignIn {
        let offered = challenge(key, &place(), &chains(), NOW);
        let info = &offered["info"];
        SignIn {
            domain: info["domain"].as_str().unwrap().into(),
            address: address.into(),
            statement: Some(STATEMENT.into()),
            uri: info["uri"].as_str().unwrap().into(),
            version: "1".into(),
            chain_id: chain.into(),
            kind: kind.into(),
            nonce: info["nonce"].as_str().unwrap().into(),
            issued_at: info["issuedAt"].as_str().unwrap().into(),
            expiration_time: info["expirationTime"].as_str().map(Into::into),
            not_before: None,
            request_id: None,
            resources: Some(vec![place().resource.into()]),
            signature: String::new(),
        }
    }

    fn signed_evm(key: &NonceKey, payer: &PrivateKeySigner) -> SignIn {
        let mut sign_in = answered(key, "eip155:8453", "eip191", &payer.address().to_string());
        let message = siwe_message(&sign_in, &chains()[0], payer.address());
        sign_in.signature = format!(
            "0x{}",
            hex::encode(payer.sign_message_sync(message.as_bytes()).unwrap().as_bytes())
        );
        sign_in
    }

    #[test]
    fn a_key_signs_in_on_base_and_nothing_else_of_it_may_change() {
        let key = NonceKey::derive(&[1; 32]);
        let payer = PrivateKeySigner::random();
        let sign_in = signed_evm(&key, &payer);
        let checked = check(&key, &sign_in, &place(), &chains(), NOW + 1_000).unwrap();
        assert_eq!(checked.wallet, payer.address().to_checksum(None));
        assert!(checked.ask_wallet.is_none(), "a key's signature needs no chain");
        // Another wallet's name on the same signature: a contract would have to accept it.
        let other = SignIn {
            address: PrivateKeySigner::random().address().to_string(),
            ..sign_in.clone()
        };
        assert!(
            check(&key, &other, &place(), &chains(), NOW)
                .unwrap()
                .ask_wallet
                .is_some()
        );
        // Another site, address, time or key: refused before any signature is looked at.
        let elsewhere = Place {
            domain: "evil.example",
            ..place()
        };
        assert!(
            check(&key, &sign_in, &elsewhere, &chains(), NOW)
                .unwrap_err()
                .contains("evil.example")
        );
        let other_command = Place {
            uri: "https://agents.example/x402/base/agent_1/commands/other",
            resource: "https://agents.example/x402/base/agent_1/commands/other",
            ..place()
        };
        assert!(check(&key, &sign_in, &other_command, &chains(), NOW).is_err());
        assert!(
            check(&key, &sign_in, &place(), &chains(), NOW + MAX_AGE_MS + 1)
                .unwrap_err()
                .contains("old")
        );
        let later = SignIn {
            issued_at: crate::clock::iso(NOW + 60_000),
            ..sign_in.clone()
        };
        assert!(
            check(&key, &later, &place(), &chains(), NOW)
                .unwrap_err()
                .contains("nonce")
        );
        let stranger = NonceKey::derive(&[2; 32]);
        assert!(
            check(&stranger, &sign_in, &place(), &chains(), NOW)
                .unwrap_err()
                .contains("nonce")
        );
    }

    #[test]
    fn an_ed25519_key_signs_in_on_solana() {
        let key = NonceKey::derive(&[1; 32]);
        let wallet = Keypair::new();
        let address = wallet.pubkey().to_string();
        let solana = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
        let mut sign_in = answered(&key, solana, "ed25519", &address);
        let message = siws_message(&sign_in, &chains()[1]);
        assert!(message.starts_with(&format!(
            "agents.example wants you to sign in with your Solana account:\n{address}\n\n{STATEMENT}\n\nURI: "
        )));
        assert!(message.contains("\nChain ID: 5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp\n"));
        sign_in.signature = wallet.sign_message(message.as_bytes()).to_string();
        assert_eq!(check(&key, &sign_in, &place(), &chains(), NOW).unwrap().wallet, address);
        let claimed = SignIn {
            address: Keypair::new().pubkey().to_string(),
            ..sign_in.clone()
        };
        assert!(check(&key, &claimed, &place(), &chains(), NOW).is_err());
        let wrong_type = SignIn {
            kind: "eip191".into(),
            ..sign_in
        };
        assert!(check(&key, &wrong_type, &place(), &chains(), NOW).is_err());
    }

    #[test]
    fn a_small_order_key_never_signs_in() {
        let key = NonceKey::derive(&[1; 32]);
        // The identity point: under a lenient check, (R = identity, s = 0) passes for it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let address = bs58::encode(identity).into_string();
        let mut sign_in = answered(&key, "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp", "ed25519", &address);
        let mut forged = [0u8; 64];
        forged[0] = 1;
        sign_in.signature = bs58::encode(forged).into_string();
        assert!(check(&key, &sign_in, &place(), &chains(), NOW).is_err());
    }

    #[test]
    fn a_siwe_message_without_a_statement_keeps_its_blank_lines() {
        let key = NonceKey::derive(&[1; 32]);
        let payer = PrivateKeySigner::random();
        let mut sign_in = answered(
            &key,
            "eip155:8453",
            "eip191",
            &payer.address().to_string().to_lowercase(),
        );
        sign_in.statement = None;
        let message = siwe_message(&sign_in, &chains()[0], payer.address());
        // EIP-4361: address, an empty line, (no statement) another, then the fields.
        assert!(
            message.contains(&format!("{}\n\n\nURI: ", payer.address().to_checksum(None))),
            "{message}"
        );
        assert!(message.contains("\nChain ID: 8453\n"));
    }
}
