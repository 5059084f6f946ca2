//! Paying an agent in tests: paid manifests, and the payments standard x402 clients build
//! (a Base EIP-3009 authorization, a Solana transfer in the specification's form), sent
//! to `/x402/...` as the clients send them.

use serde_json::{Value, json};

use super::chains::{LocalBase, LocalSolana};
use super::{Reply, TestEnv, client, manifest, post_json, send};

/// A long-running paid command (0.03 USDC): paid, it answers 202 and is polled.
pub const REPORT: &str = r#"
[[commands]]
command = "report"
description = "A long report"
handler_type = "simple_text"
integrations = ["x402"]
price_usd = 0.03
long_running = true
config = { text = "The report is ready." }
"#;

/// A command sold on MCP and x402 (0.03 USD).
pub const WEATHER: &str = r#"
[[commands]]
command = "weather"
description = "Weather for a city"
handler_type = "simple_text"
integrations = ["mcp", "x402"]
price_usd = 0.03
parameters = [{ name = "city", type = "string", required = true }]
config = { text = "Sunny in {{city}}" }
"#;

/// A paid command that always fails after settlement (nothing listens on port 9), so its
/// payment is refunded.
pub const BROKEN: &str = r#"
[[commands]]
command = "broken"
description = "Calls a server that is not there"
handler_type = "webhook"
integrations = ["x402"]
price_usd = 0.02
config = { url = "http://127.0.0.1:9/hook" }
"#;

/// A paid long-running command that always fails, after the payer has its status address.
pub const SLOW_BROKEN: &str = r#"
[[commands]]
command = "slowbroken"
description = "A long job that fails"
handler_type = "webhook"
integrations = ["x402"]
price_usd = 0.04
long_running = true
config = { url = "http://127.0.0.1:9/hook" }
"#;

/// A paid command (0.02 USD) that calls the webhook at `url`.
pub fn paid_webhook(name: &str, description: &str, url: &str) -> String {
    format!(
        r#"
[[commands]]
command = "{name}"
description = "{description}"
handler_type = "webhook"
integrations = ["x402"]
price_usd = 0.02
config = {{ url = "{url}" }}
"#
    )
}

pub fn paid_manifest(username: &str) -> String {
    format!(
        r#"{}
[[commands]]
command = "forecast"
description = "Weather for a city"
handler_type = "simple_text"
integrations = ["x402"]
parameters = [{{ name = "city", type = "string", required = true, description = "City name" }}, {{ name = "name", type = "string" }}]
config = {{ text = "Sunny in {{{{city}}}}" }}

[x402]
enabled = true
default_price_usd = 0.01
networks = ["solana", "base"]
"#,
        manifest(username)
    )
}

pub async fn post_x402(url: &str, body: &Value) -> Reply {
    post_json(url, None, body).await
}

/// Signs an EIP-3009 authorization for `requirement` as x402 clients do; the X-PAYMENT value.
pub fn base_payment(
    payer: &alloy::signers::local::PrivateKeySigner,
    requirement: &Value,
    value: u64,
    nonce: u8,
    valid_for: u64,
) -> String {
    use alloy::signers::SignerSync;
    let sign = |digest| payer.sign_hash_sync(&digest).unwrap().as_bytes().to_vec();
    base_payment_as(payer.address(), sign, requirement, value, nonce, valid_for)
}

/// An authorization from `from` for `requirement`, its signature what `sign` makes of the
/// EIP-712 digest (a key's, a smart wallet's own form, or anything else); the X-PAYMENT value.
pub fn base_payment_as(
    from: alloy::primitives::Address,
    sign: impl FnOnce(alloy::primitives::B256) -> Vec<u8>,
    requirement: &Value,
    value: u64,
    nonce: u8,
    valid_for: u64,
) -> String {
    use agent_host::x402::evm::{Authorization, Expected, PayerSignature};
    use alloy::primitives::{B256, U256};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expected = Expected {
        pay_to: requirement["payTo"].as_str().unwrap().parse().unwrap(),
        amount: agent_host::money::MicroUsdc(value),
        usdc: requirement["asset"].as_str().unwrap().parse().unwrap(),
        chain_id: 8453,
        domain_name: requirement["extra"]["name"].as_str().unwrap().into(),
        domain_version: requirement["extra"]["version"].as_str().unwrap().into(),
    };
    let auth = Authorization {
        from,
        to: expected.pay_to,
        value: U256::from(value),
        valid_after: U256::from(now - 600),
        valid_before: U256::from(now + valid_for),
        nonce: B256::repeat_byte(nonce),
        signature: PayerSignature::Ecdsa {
            signature: alloy::primitives::Signature::test_signature(),
            raw: Default::default(),
        },
    };
    let signature = sign(auth.signing_hash(&expected.domain()));
    let envelope = json!({
        "x402Version": 1, "scheme": "exact", "network": "base",
        "payload": {
            "signature": format!("0x{}", hex::encode(signature)),
            "authorization": {
                "from": auth.from.to_string(), "to": auth.to.to_string(), "value": value.to_string(),
                "validAfter": auth.valid_after.to_string(), "validBefore": auth.valid_before.to_string(),
                "nonce": auth.nonce.to_string(),
            }
        }
    });
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, envelope.to_string())
}

/// The same Base payment with another `from`: its signature no longer matches.
pub fn in_the_name_of(payment: &str, from: &str) -> String {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut envelope: Value = serde_json::from_slice(&engine.decode(payment).unwrap()).unwrap();
    envelope["payload"]["authorization"]["from"] = json!(from);
    engine.encode(envelope.to_string())
}

pub async fn paid(url: &str, body: &Value, payment: &str) -> Reply {
    send(client().post(url).header("x-payment", payment).json(body)).await
}

pub fn solana_key(field: &Value) -> solana_pubkey::Pubkey {
    std::str::FromStr::from_str(field.as_str().unwrap()).unwrap()
}

/// The instructions standard x402 clients build: compute limit, compute price, and
/// `TransferChecked` of `amount` USDC from `authority`'s token account to payTo's.
pub fn solana_instructions(
    authority: &solana_pubkey::Pubkey,
    requirement: &Value,
    amount: u64,
) -> Vec<solana_instruction::Instruction> {
    let (pay_to, mint) = (solana_key(&requirement["payTo"]), solana_key(&requirement["asset"]));
    let ata = |owner: &solana_pubkey::Pubkey| agent_host::chains::solana::associated_token_address(owner, &mint);
    vec![
        solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &[2, 0x20, 0x4e, 0, 0], vec![]),
        solana_instruction::Instruction::new_with_bytes(COMPUTE_BUDGET, &[3, 1, 0, 0, 0, 0, 0, 0, 0], vec![]),
        spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &ata(authority),
            &mint,
            &ata(&pay_to),
            authority,
            &[],
            amount,
            6,
        )
        .unwrap(),
    ]
}

pub const COMPUTE_BUDGET: solana_pubkey::Pubkey =
    solana_pubkey::Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");

pub async fn latest_blockhash(chain: &super::chains::LocalSolana) -> solana_hash::Hash {
    let latest = super::chains::rpc(
        &chain.rpc_url,
        "getLatestBlockhash",
        json!([{ "commitment": "confirmed" }]),
    )
    .await;
    std::str::FromStr::from_str(latest["value"]["blockhash"].as_str().unwrap()).unwrap()
}

/// An X-PAYMENT value: `instructions` in a v0 message paid for by `fee_payer`, signed by
/// each of `signers` in its own slot (slots of others stay empty). With `spec_form`, the
/// payload also carries the first signature, as the x402 specification's own form does.
pub fn solana_envelope(
    fee_payer: &solana_pubkey::Pubkey,
    instructions: &[solana_instruction::Instruction],
    signers: &[&solana_keypair::Keypair],
    blockhash: solana_hash::Hash,
    spec_form: bool,
) -> String {
    use solana_signer::Signer;
    let message = solana_message::VersionedMessage::V0(
        solana_message::v0::Message::try_compile(fee_payer, instructions, &[], blockhash).unwrap(),
    );
    let required = message.header().num_required_signatures as usize;
    let bytes = message.serialize();
    let signatures = message.static_account_keys()[..required]
        .iter()
        .map(|key| {
            signers
                .iter()
                .find(|s| s.pubkey() == *key)
                .map(|s| s.sign_message(&bytes))
                .unwrap_or_default()
        })
        .collect();
    let tx = solana_transaction::versioned::VersionedTransaction { signatures, message };
    let b64 = |bytes: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    let mut payload = json!({ "transaction": b64(&bincode::serialize(&tx).unwrap()) });
    if spec_form {
        payload["signature"] = json!(b64(tx.signatures[0].as_ref()));
    }
    let envelope = json!({ "x402Version": 1, "scheme": "exact", "network": "solana", "payload": payload });
    b64(envelope.to_string().as_bytes())
}

/// A Solana payment in the standard x402 form: fee payer = `extra.feePayer` (left for the
/// server to sign), the payer signs its `TransferChecked` of `amount` to `payTo`.
pub async fn solana_payment(
    chain: &super::chains::LocalSolana,
    payer: &solana_keypair::Keypair,
    requirement: &Value,
    amount: u64,
) -> String {
    use solana_signer::Signer;
    solana_envelope(
        &solana_key(&requirement["extra"]["feePayer"]),
        &solana_instructions(&payer.pubkey(), requirement, amount),
        &[payer],
        latest_blockhash(chain).await,
        false,
    )
}

/// A seller on the local Solana chain whose wallet holds 1 SOL and an empty USDC account.
pub async fn solana_shop(chain: &LocalSolana, env: TestEnv, manifest_extra: &str) -> (TestEnv, String) {
    // Room for the races below in the abuse limits.
    let env = env
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "1000")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "1000")
        .with_envs(chain.env());
    env.create_account("acme", "free");
    env.apply_agent(&format!("{}{manifest_extra}", paid_manifest("seller")), "acme");
    let wallet = env.create_wallet("seller", "solana");
    chain.set_sol(&wallet, 1_000_000_000).await;
    chain.set_usdc(&wallet, 0).await;
    (env, wallet)
}

/// A seller on the local Base chain whose wallet holds gas (it relays settlements).
pub async fn base_shop(chain: &LocalBase, env: TestEnv, manifest_extra: &str) -> (TestEnv, String) {
    let env = env.with_envs(chain.env());
    env.create_account("acme", "free");
    env.apply_agent(&format!("{}{manifest_extra}", paid_manifest("seller")), "acme");
    let wallet = env.create_wallet("seller", "base");
    chain.set_eth(&wallet, 10u128.pow(16)).await;
    (env, wallet)
}

/// A new Base payer holding `micro` USDC, and its address.
pub async fn base_payer(chain: &LocalBase, micro: u64) -> (alloy::signers::local::PrivateKeySigner, String) {
    let payer = alloy::signers::local::PrivateKeySigner::random();
    let address = payer.address().to_checksum(None);
    chain.mint_usdc(&address, micro).await;
    (payer, address)
}

/// A signed Solana transaction over a blockhash the chain never issued: it can never land.
pub fn unsent_solana_transaction() -> (String, String) {
    use solana_signer::Signer;
    let signer = solana_keypair::Keypair::new();
    let memo = solana_pubkey::Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
    let message = solana_message::Message::new_with_blockhash(
        &[solana_instruction::Instruction::new_with_bytes(memo, b"cut", vec![])],
        Some(&signer.pubkey()),
        &solana_hash::Hash::new_unique(),
    );
    let signature = signer.sign_message(&message.serialize());
    let tx = solana_transaction::versioned::VersionedTransaction {
        signatures: vec![signature],
        message: solana_message::VersionedMessage::Legacy(message),
    };
    let raw = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        bincode::serialize(&tx).unwrap(),
    );
    (signature.to_string(), raw)
}

pub fn b64_json(text: &str) -> Value {
    serde_json::from_slice(&base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text).unwrap()).unwrap()
}

/// The decoded `PAYMENT-REQUIRED` header of an answer.
pub fn payment_required(reply: &Reply) -> Value {
    let header = reply
        .header("payment-required")
        .unwrap_or_else(|| panic!("no PAYMENT-REQUIRED header: {} {}", reply.status, reply.text));
    b64_json(header)
}

/// A v1 `X-PAYMENT` value re-sent as a v2 `PAYMENT-SIGNATURE`: the same signed payload,
/// with the requirement the payer accepted.
pub fn as_v2(v1: &str, accepted: &Value) -> String {
    let envelope = b64_json(v1);
    let v2 = json!({
        "x402Version": 2,
        "resource": { "url": "ignored by the server", "mimeType": "application/json" },
        "accepted": accepted,
        "payload": envelope["payload"],
    });
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, v2.to_string())
}

/// A v1 `X-PAYMENT` value re-sent in v2 under the payer's own id for it (x402's
/// payment-identifier), as a client that names its payments echoes the offer.
pub fn named_v2(v1: &str, accepted: &Value, id: &str) -> String {
    let mut v2 = b64_json(&as_v2(v1, accepted));
    v2["extensions"] = json!({ "payment-identifier": { "info": { "required": false, "id": id } } });
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, v2.to_string())
}

pub async fn paid_v2(url: &str, body: &Value, payment: &str) -> Reply {
    send(client().post(url).header("payment-signature", payment).json(body)).await
}

/// The payments of the agent `seller` (the shops' agent), newest first, as its owner's CLI
/// lists them.
pub fn payments(env: &TestEnv) -> Vec<Value> {
    env.cli_json(&["payments", "list", "--agent", "seller", "--limit", "100000"])
        .as_array()
        .unwrap()
        .clone()
}

/// A paid route's answer: its status and its envelope's `code`.
pub fn code(reply: &Reply) -> (u16, String) {
    (
        reply.status,
        reply.json()["code"].as_str().unwrap_or_default().to_string(),
    )
}

/// Waits until the newest payment is in `state`.
pub async fn newest_payment_becomes(env: &TestEnv, state: &str, limit: std::time::Duration) -> Value {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let list = payments(env);
        if list.first().is_some_and(|p| p["state"] == state) {
            return list[0].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the payment never became {state}: {list:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The signed receipt (`offer-receipt`) in a decoded settlement, if there is one.
pub fn signed_receipt(settlement: &Value) -> Option<&Value> {
    settlement
        .pointer("/extensions/offer-receipt/info/receipt")
        .filter(|receipt| !receipt.is_null())
}

/// Each receipt checked by the `verifyReceipt` recipe of docs/x402.md against the address
/// that was paid: what it states, or why the recipe refused it. One Node.js run for all.
pub async fn verify_receipts(receipts: &[(Value, String)]) -> Vec<Result<Value, String>> {
    let request = json!({
        "receipts": receipts
            .iter()
            .map(|(receipt, pay_to)| json!({ "receipt": receipt, "payTo": pay_to }))
            .collect::<Vec<_>>(),
    });
    let out = super::client_script("node", "node/verify_receipt.mjs", &request, "the receipt verifier").await;
    out["verified"]
        .as_array()
        .expect("the verifier answers a list")
        .iter()
        .map(|one| match one.get("payload") {
            Some(payload) => Ok(payload.clone()),
            None => Err(one["error"].as_str().unwrap_or_default().to_string()),
        })
        .collect()
}
