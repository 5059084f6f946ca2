//! EIP-3009 authorizations on Base: what the payer signs, how the agent's wallet settles one
//! (for a key's signature, a deployed wallet's, or one not deployed yet), and how the chain
//! shows that an authorization was used and what it paid.

use alloy::primitives::{Address, B256, Bytes, TxKind, U256};
use alloy::sol_types::{Eip712Domain, SolCall, SolEvent, SolStruct};
use serde_json::{Value, json};

use super::authorization_logs::{AuthorizationTransfer, Paid, authorization_transfer};
use super::{BaseChain, out_of_gas, quantity_u64};
use crate::chains::smart_wallets::{self, PayerSignature};
use crate::chains::{ChainError, SignedTx, WalletKey};

alloy::sol! {
    /// The part of USDC (FiatTokenV2_2) that executes authorizations.
    interface IUsdcAuthorizations {
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
        /// The form for any signer: a contract's signature is checked by ERC-1271.
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
    }
}

alloy::sol! {
    /// EIP-3009, as USDC (FiatTokenV2) defines it.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }

    /// What USDC logs when an authorization is executed, and when tokens move.
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event Transfer(address indexed from, address indexed to, uint256 value);
}

/// An EIP-3009 `transferWithAuthorization` signed by `from`: `(from, nonce)` is its identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Authorization {
    pub from: Address,
    pub to: Address,
    pub value: U256,
    pub valid_after: U256,
    pub valid_before: U256,
    pub nonce: B256,
    pub signature: PayerSignature,
}

impl Authorization {
    /// The EIP-712 digest the payer signs, for a token's domain.
    pub fn signing_hash(&self, domain: &Eip712Domain) -> B256 {
        TransferWithAuthorization {
            from: self.from,
            to: self.to,
            value: self.value,
            validAfter: self.valid_after,
            validBefore: self.valid_before,
            nonce: self.nonce,
        }
        .eip712_signing_hash(domain)
    }
}

/// How many times the gas cap an undeployed wallet's refused check is tried again with.
const OVER_CAP_PROBE: u64 = 10;

/// Whether a node's error is the call's own failure (a revert, an invalid instruction),
/// as opposed to the node failing to answer.
fn execution_failed(code: i64, message: &str) -> bool {
    let message = message.to_lowercase();
    code == 3 || message.contains("revert") || message.contains("evm error") || message.contains("invalid opcode")
}

/// What a payer's wallet said of a signature (ERC-1271).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalletVerdict {
    Accepts,
    Refuses,
    /// Its check needs more gas than one settlement may use.
    OverGasCap(u64),
}

impl BaseChain {
    /// Whether an EIP-3009 nonce of `from` was used (or cancelled) on chain.
    pub async fn authorization_used(&self, from: Address, nonce: B256) -> Result<bool, ChainError> {
        let data = self
            .call(
                self.usdc,
                IUsdcAuthorizations::authorizationStateCall {
                    authorizer: from,
                    nonce,
                }
                .abi_encode(),
            )
            .await?;
        if data.len() != 32 {
            return Err(ChainError::Unavailable(format!(
                "authorizationState on {} answered {} bytes; is it USDC with EIP-3009?",
                self.usdc_text,
                data.len()
            )));
        }
        Ok(data[31] == 1)
    }

    /// The transfer that `from`'s authorization `nonce` made, paying `to` exactly `value`,
    /// whoever sent it (the payer can relay its own authorization before us): found by the
    /// token's `AuthorizationUsed` log, then checked for the `Transfer` that follows it in
    /// the same call (see [`authorization_transfer`]). The search starts at the block of
    /// `not_before` (counting one block a second, which overestimates Base's two) and spans
    /// at most `MAX_LOG_BLOCKS`, what RPC providers accept in one query.
    pub async fn authorization_settlement(
        &self,
        from: Address,
        nonce: B256,
        to: Address,
        value: U256,
        not_before: u64,
    ) -> Result<Option<AuthorizationTransfer>, ChainError> {
        let topics = [AuthorizationUsed::SIGNATURE_HASH, from.into_word(), nonce];
        let logs = self.usdc_logs_since(topics, not_before).await?;
        // A nonce is used once, so one live log at most; a log of a reorganised block is not.
        let Some(hash) = logs
            .iter()
            .filter(|log| log["removed"] != Value::Bool(true))
            .find_map(|log| log["transactionHash"].as_str())
        else {
            return Ok(None);
        };
        let receipt: Value = self.rpc.call("eth_getTransactionReceipt", json!([hash])).await?;
        if receipt.is_null() || quantity_u64(&receipt["status"], "eth_getTransactionReceipt")? != 1 {
            return Ok(None);
        }
        let paid = Paid {
            usdc: self.usdc,
            from,
            nonce,
            to,
            value,
        };
        Ok(
            authorization_transfer(&receipt, &paid).map(|log_index| AuthorizationTransfer {
                transaction: hash.to_string(),
                log_index,
            }),
        )
    }

    /// USDC's logs with `topics` since `not_before` (Unix seconds, counted as one block a
    /// second, which overestimates Base's two), at most `MAX_LOG_BLOCKS` back: what RPC
    /// providers accept in one query.
    pub(super) async fn usdc_logs_since(&self, topics: [B256; 3], not_before: u64) -> Result<Vec<Value>, ChainError> {
        const MAX_LOG_BLOCKS: u64 = 10_000;
        let head: Value = self.rpc.call("eth_getBlockByNumber", json!(["latest", false])).await?;
        let head_number = quantity_u64(&head["number"], "eth_getBlockByNumber")?;
        let head_time = quantity_u64(&head["timestamp"], "eth_getBlockByNumber")?;
        let span = head_time
            .saturating_sub(not_before)
            .saturating_add(10)
            .min(MAX_LOG_BLOCKS);
        let filter = json!({
            "address": self.usdc.to_string(),
            "fromBlock": format!("0x{:x}", head_number.saturating_sub(span)),
            "toBlock": "latest",
            "topics": topics.map(|t| t.to_string()),
        });
        Ok(self.rpc.call("eth_getLogs", json!([filter])).await?)
    }

    /// Signs, as `relayer` (who pays the gas), the transaction that settles an authorization.
    pub async fn sign_settlement(&self, relayer: &WalletKey, auth: &Authorization) -> Result<SignedTx, ChainError> {
        let WalletKey::Base(signer) = relayer else {
            return Err(ChainError::Refused("not a Base wallet key".into()));
        };
        let signature = self.checked_now(auth.from, &auth.signature).await?;
        let (to, data) = self.settlement(auth, &signature);
        self.sign_tx(signer, to, data).await
    }

    /// Estimates the settlement of `auth` as `relayer` would send it, within the gas cap:
    /// `Refused` when it would revert or needs more gas than the cap.
    pub async fn estimate_settlement(&self, relayer: Address, auth: &Authorization) -> Result<u64, ChainError> {
        let signature = self.checked_now(auth.from, &auth.signature).await?;
        let (to, data) = self.settlement(auth, &signature);
        self.estimate_gas(relayer, to, &data, self.caps.gas).await
    }

    /// The signature as the chain checks it now: an ERC-6492 one whose wallet has code by
    /// now is its inner signature (nothing left to deploy, nothing to pay for deploying).
    async fn checked_now(&self, from: Address, signature: &PayerSignature) -> Result<PayerSignature, ChainError> {
        Ok(match signature {
            PayerSignature::Counterfactual { signature, .. } if self.has_code(from).await? => {
                PayerSignature::Contract(signature.clone())
            }
            other => other.clone(),
        })
    }

    /// The settlement: USDC's `transferWithAuthorization`, with (v, r, s) for a key's
    /// signature and with the signature's bytes for a wallet's own; for a wallet not yet
    /// deployed, a contract creation that deploys it through its factory, then calls that.
    fn settlement(&self, auth: &Authorization, signature: &PayerSignature) -> (TxKind, Vec<u8>) {
        let with_bytes = |signature: Bytes| {
            IUsdcAuthorizations::transferWithAuthorization_1Call {
                from: auth.from,
                to: auth.to,
                value: auth.value,
                validAfter: auth.valid_after,
                validBefore: auth.valid_before,
                nonce: auth.nonce,
                signature,
            }
            .abi_encode()
        };
        match signature {
            PayerSignature::Ecdsa { signature, .. } => {
                let data = IUsdcAuthorizations::transferWithAuthorization_0Call {
                    from: auth.from,
                    to: auth.to,
                    value: auth.value,
                    validAfter: auth.valid_after,
                    validBefore: auth.valid_before,
                    nonce: auth.nonce,
                    v: 27 + u8::from(signature.v()),
                    r: signature.r().into(),
                    s: signature.s().into(),
                }
                .abi_encode();
                (TxKind::Call(self.usdc), data)
            }
            PayerSignature::Contract(bytes) => (TxKind::Call(self.usdc), with_bytes(bytes.clone())),
            PayerSignature::Counterfactual { deployment, signature } => {
                let settle = with_bytes(signature.clone());
                let code = smart_wallets::deploy_then_call(deployment, auth.from, self.usdc, &settle);
                (TxKind::Create, code)
            }
        }
    }

    /// Whether `from`'s wallet accepts `signature` for `digest` (ERC-1271), deploying it
    /// first in the simulation when the signature says how (ERC-6492). An `eth_call`, so
    /// nothing changes on chain; bounded by the settlement's gas cap and the RPC timeout.
    /// A node that cannot answer is `Unavailable`, never a refusal of the signature.
    pub async fn wallet_accepts(
        &self,
        from: Address,
        digest: B256,
        signature: &PayerSignature,
    ) -> Result<WalletVerdict, ChainError> {
        let signature = self.checked_now(from, signature).await?;
        let check = smart_wallets::is_valid_signature_call(digest, signature.checked_bytes());
        let cap = self.caps.gas;
        let Some(deployment) = signature.deployment() else {
            let call = json!({ "to": from.to_string(), "data": Bytes::from(check).to_string() });
            return self.signature_check(call, cap).await;
        };
        let call =
            json!({ "data": Bytes::from(smart_wallets::deploy_then_call(deployment, from, from, &check)).to_string() });
        match self.signature_check(call.clone(), cap).await? {
            // An inner call that runs out of gas fails as a refusal does: told apart by
            // trying again with more gas than any settlement may use.
            WalletVerdict::Refuses => match self.signature_check(call, cap.saturating_mul(OVER_CAP_PROBE)).await? {
                WalletVerdict::Refuses => Ok(WalletVerdict::Refuses),
                _ => Ok(WalletVerdict::OverGasCap(cap)),
            },
            verdict => Ok(verdict),
        }
    }

    /// One `eth_call` of a signature check given `gas`: its verdict.
    async fn signature_check(&self, mut call: Value, gas: u64) -> Result<WalletVerdict, ChainError> {
        call["gas"] = json!(format!("0x{gas:x}"));
        match self.rpc.call::<String>("eth_call", json!([call, "latest"])).await {
            Ok(answer) => {
                let answer = hex::decode(answer.trim_start_matches("0x")).unwrap_or_default();
                Ok(match smart_wallets::accepts(&answer) {
                    true => WalletVerdict::Accepts,
                    false => WalletVerdict::Refuses,
                })
            }
            Err(err) => match err.node_error() {
                Some((_, message, _)) if out_of_gas(message) => Ok(WalletVerdict::OverGasCap(gas)),
                // The call itself failed: not this signer's signature.
                Some((code, message, _)) if execution_failed(code, message) => Ok(WalletVerdict::Refuses),
                // Rate limits, a node behind or down: no verdict at all.
                _ => Err(err.into()),
            },
        }
    }

    pub async fn has_code(&self, address: Address) -> Result<bool, ChainError> {
        let code: String = self
            .rpc
            .call("eth_getCode", json!([address.to_string(), "latest"]))
            .await?;
        Ok(code.trim_start_matches("0x").chars().any(|c| c != '0'))
    }
}
