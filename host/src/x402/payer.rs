//! The payer's side of x402 `exact`, for an agent paying a service its command called:
//! reading what a 402 asks (v1 in its JSON body, v2 in its `PAYMENT-REQUIRED` header),
//! signing a payment for one of its offers, and reading how the payee settled it. What
//! may be paid, and from which wallet, is decided by `services/spending.rs`; this signs.

use alloy::primitives::{Address, B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::Eip712Domain;
use base64::Engine;
use serde_json::{Map, Value, json};
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use super::wire::{PAYMENT_REQUIRED_HEADER, SCHEME, Version};
use crate::chains::base::Authorization;
use crate::chains::smart_wallets::PayerSignature;
use crate::money::MicroUsdc;

/// How long before now an authorization is valid from, for a payee's clock that is behind
/// (the reference clients' ten minutes).
const VALID_BEFORE_NOW_SECS: u64 = 600;
/// The longest an authorization this host signs stays valid, whatever the payee asks: a
/// payment it refused can be settled for no longer than this.
pub const MAX_VALID_SECS: u64 = 600;
/// The compute budget of a payment's transaction (the reference v2 clients' figures).
const COMPUTE_UNIT_LIMIT: u32 = 20_000;
const COMPUTE_UNIT_PRICE_MICRO_LAMPORTS: u64 = 1;
const COMPUTE_BUDGET: Pubkey = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
const MEMO: Pubkey = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
const USDC_DECIMALS: u8 = 6;

/// One way to pay that a 402 offered, as its server wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    pub version: Version,
    pub scheme: String,
    /// As the offer's version names it (`base`, `eip155:8453`).
    pub network: String,
    pub amount: MicroUsdc,
    pub asset: String,
    pub pay_to: String,
    pub max_timeout_seconds: u64,
    pub extra: Map<String, Value>,
    /// v2: the requirement as given, echoed back whole as `accepted`.
    raw: Value,
    /// v2: the `resource` object of the 402, echoed back.
    resource: Option<Value>,
}

/// The offers of a 402 answer; `None` when it is not an x402 one (no header, no body of
/// version 1). Offers that cannot be read are left out.
pub fn offers_in(headers: &[(String, String)], body: &[u8]) -> Option<Vec<Offered>> {
    if let Some(required) = header_json(headers, PAYMENT_REQUIRED_HEADER).filter(|r| r["x402Version"] == 2) {
        return offers_of(&required);
    }
    offers_of(&serde_json::from_slice(body).ok()?)
}

/// The offers of a payment-required object of either version (a 402's, or an MCP tool
/// result's structured content); `None` when it is not one.
pub fn offers_of(required: &Value) -> Option<Vec<Offered>> {
    let version = match required["x402Version"].as_u64() {
        Some(1) => Version::V1,
        Some(2) => Version::V2,
        _ => return None,
    };
    let resource = match version {
        Version::V1 => None,
        Version::V2 => required.get("resource").cloned(),
    };
    let accepts = required["accepts"].as_array()?;
    Some(
        accepts
            .iter()
            .filter_map(|a| offer(version, a, resource.clone()))
            .collect(),
    )
}

fn offer(version: Version, requirement: &Value, resource: Option<Value>) -> Option<Offered> {
    let text = |name: &str| requirement.get(name).and_then(Value::as_str).map(str::to_string);
    let amount_field = match version {
        Version::V1 => "maxAmountRequired",
        Version::V2 => "amount",
    };
    Some(Offered {
        version,
        scheme: text("scheme")?,
        network: text("network")?,
        // Nothing is paid for nothing: an offer of 0 is not one.
        amount: MicroUsdc(text(amount_field)?.parse().ok().filter(|n: &u64| *n > 0)?),
        asset: text("asset")?,
        pay_to: text("payTo")?,
        max_timeout_seconds: requirement
            .get("maxTimeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(60),
        extra: requirement
            .get("extra")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        raw: requirement.clone(),
        resource,
    })
}

impl Offered {
    /// Whether it is the `exact` scheme, the one this host pays.
    pub fn is_exact(&self) -> bool {
        self.scheme == SCHEME
    }

    /// The payment as a payer sends it (`X-PAYMENT`'s or `PAYMENT-SIGNATURE`'s object, or
    /// MCP's `_meta["x402/payment"]`), for a network `payload`.
    pub fn envelope(&self, payload: Value) -> Value {
        match self.version {
            Version::V1 => json!({
                "x402Version": 1,
                "scheme": self.scheme,
                "network": self.network,
                "payload": payload,
            }),
            Version::V2 => {
                let mut envelope = json!({ "x402Version": 2, "accepted": self.raw, "payload": payload });
                if let Some(resource) = &self.resource {
                    envelope["resource"] = resource.clone();
                }
                envelope
            }
        }
    }
}

/// The HTTP header that carries a payment `envelope` of `version`: its name and value.
pub fn header(version: Version, envelope: &Value) -> (&'static str, String) {
    let value = base64::engine::general_purpose::STANDARD.encode(envelope.to_string());
    (version.payment_header(), value)
}

/// The USDC contract a Base payment is signed for.
#[derive(Debug, Clone)]
pub struct EvmToken {
    pub chain_id: u64,
    pub usdc: Address,
    /// Its EIP-712 domain's name and version.
    pub name: String,
    pub version: String,
}

/// A signed EIP-3009 authorization paying `offer` from `key`'s address: the `payload` of a
/// Base payment. Valid from ten minutes ago (a payee's clock may be behind) until the
/// offer's timeout, at most [`MAX_VALID_SECS`], with a fresh random nonce.
pub fn evm_payload(key: &PrivateKeySigner, offer: &Offered, token: &EvmToken, now_secs: u64) -> Result<Value, String> {
    let to: Address = offer
        .pay_to
        .parse()
        .map_err(|_| format!("payTo '{}' is not an address", offer.pay_to))?;
    let mut nonce = [0u8; 32];
    crate::random::fill(&mut nonce);
    let valid_for = offer.max_timeout_seconds.clamp(1, MAX_VALID_SECS);
    let auth = Authorization {
        from: key.address(),
        to,
        value: U256::from(offer.amount.0),
        valid_after: U256::from(now_secs.saturating_sub(VALID_BEFORE_NOW_SECS)),
        valid_before: U256::from(now_secs + valid_for),
        nonce: B256::from(nonce),
        // Not part of the digest: a stand-in until the signature is made.
        signature: PayerSignature::Ecdsa {
            signature: alloy::primitives::Signature::test_signature(),
            raw: Default::default(),
        },
    };
    let domain = Eip712Domain::new(
        Some(token.name.clone().into()),
        Some(token.version.clone().into()),
        Some(U256::from(token.chain_id)),
        Some(token.usdc),
        None,
    );
    let signature = key
        .sign_hash_sync(&auth.signing_hash(&domain))
        .map_err(|e| format!("signing failed: {e}"))?;
    Ok(json!({
        "signature": format!("0x{}", hex::encode(signature.as_bytes())),
        "authorization": {
            "from": auth.from.to_checksum(None),
            "to": auth.to.to_checksum(None),
            "value": offer.amount.0.to_string(),
            "validAfter": auth.valid_after.to_string(),
            "validBefore": auth.valid_before.to_string(),
            "nonce": auth.nonce.to_string(),
        }
    }))
}

/// A Solana payment of `offer` from `key`: a v0 transaction whose fee payer is the one the
/// offer names (`extra.feePayer`, left for it to sign), carrying a compute budget, the USDC
/// `TransferChecked` to payTo's token account, and a random memo (two payments alike in
/// everything else still differ). The `payload` of a Solana payment.
pub fn svm_payload(key: &Keypair, offer: &Offered, mint: &Pubkey, blockhash: Hash) -> Result<Value, String> {
    let pubkey = |text: &str, what: &str| -> Result<Pubkey, String> {
        text.parse::<Pubkey>()
            .map_err(|_| format!("{what} '{text}' is not a Solana address"))
    };
    let fee_payer = offer
        .extra
        .get("feePayer")
        .and_then(Value::as_str)
        .ok_or("the offer names no fee payer (extra.feePayer)")?;
    let fee_payer = pubkey(fee_payer, "extra.feePayer")?;
    let pay_to = pubkey(&offer.pay_to, "payTo")?;
    let owner = key.pubkey();
    if fee_payer == owner {
        return Err("the offer asks the paying wallet to pay the fee as well".into());
    }
    let ata = |who: &Pubkey| crate::chains::solana::associated_token_address(who, mint);
    let mut limit = vec![2u8];
    limit.extend_from_slice(&COMPUTE_UNIT_LIMIT.to_le_bytes());
    let mut price = vec![3u8];
    price.extend_from_slice(&COMPUTE_UNIT_PRICE_MICRO_LAMPORTS.to_le_bytes());
    let mut memo = [0u8; 16];
    crate::random::fill(&mut memo);
    let instructions = [
        solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &limit, vec![]),
        solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &price, vec![]),
        spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &ata(&owner),
            mint,
            &ata(&pay_to),
            &owner,
            &[],
            offer.amount.0,
            USDC_DECIMALS,
        )
        .map_err(|e| e.to_string())?,
        solana_instruction::Instruction::new_with_bytes(MEMO, hex::encode(memo).as_bytes(), vec![]),
    ];
    let message = solana_message::VersionedMessage::V0(
        solana_message::v0::Message::try_compile(&fee_payer, &instructions, &[], blockhash)
            .map_err(|e| format!("cannot build the transaction: {e}"))?,
    );
    let required = usize::from(message.header().num_required_signatures);
    let bytes = message.serialize();
    let signatures = message.static_account_keys()[..required]
        .iter()
        .map(|signer| {
            if *signer == owner {
                key.sign_message(&bytes)
            } else {
                solana_signature::Signature::default()
            }
        })
        .collect();
    let tx = solana_transaction::versioned::VersionedTransaction { signatures, message };
    let wire = bincode::serialize(&tx).map_err(|e| e.to_string())?;
    Ok(json!({ "transaction": base64::engine::general_purpose::STANDARD.encode(wire) }))
}

/// How the payee said it settled: its transaction, or why it did not.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    pub success: bool,
    pub transaction: Option<String>,
    pub error: Option<String>,
}

/// The settlement an answer reports in `PAYMENT-RESPONSE` or `X-PAYMENT-RESPONSE`.
pub fn settlement_in(headers: &[(String, String)]) -> Option<Settlement> {
    let settled = [Version::V2, Version::V1]
        .iter()
        .find_map(|v| header_json(headers, v.response_header()))?;
    let text = |name: &str| {
        settled
            .get(name)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(|t| t.chars().take(200).collect::<String>())
    };
    Some(Settlement {
        success: settled["success"].as_bool().unwrap_or(false),
        transaction: text("transaction"),
        error: text("errorReason").or_else(|| text("error")),
    })
}

/// Why a 402 refused a payment, in its words (a v1 body's `error`, a v2 header's).
pub fn refusal_in(headers: &[(String, String)], body: &[u8]) -> Option<String> {
    let from_header =
        header_json(headers, PAYMENT_REQUIRED_HEADER).and_then(|v| v["error"].as_str().map(str::to_string));
    let from_body = || {
        serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
    };
    from_header
        .or_else(from_body)
        .map(|text| text.chars().take(300).collect())
}

/// An x402 header's object: base64 of JSON.
fn header_json(headers: &[(String, String)], name: &str) -> Option<Value> {
    let (_, value) = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(value.trim()).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests;
