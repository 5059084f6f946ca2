//! Permit2 witness transfers on Base, as x402's `upto` scheme uses them: the payer signs a
//! transfer of up to a maximum to the `x402UptoPermit2Proxy`, binding the recipient and
//! the one address allowed to settle it (the witness); that address later calls the proxy
//! with the amount actually owed. Both contracts sit at the same address on every chain.

use alloy::primitives::{Address, U256, address};
use alloy::sol_types::{Eip712Domain, SolCall, SolStruct};

use super::BaseChain;
use crate::chains::smart_wallets::PayerSignature;
use crate::chains::{ChainError, SignedTx, WalletKey};

/// Uniswap's Permit2, deployed at this address on every EVM chain.
pub const PERMIT2: Address = address!("0x000000000022D473030F116dDEE9F6B43aC78BA3");
/// x402's `x402UptoPermit2Proxy`, deployed at this address on every EVM chain.
pub const UPTO_PROXY: Address = address!("0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002");

alloy::sol! {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    /// What the upto proxy binds into the signature: who is paid, who may settle, and from when.
    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    /// The EIP-712 message the payer signs (Permit2's, with the proxy's witness).
    struct PermitWitnessTransferFrom {
        TokenPermissions permitted;
        address spender;
        uint256 nonce;
        uint256 deadline;
        Witness witness;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    interface IPermit2 {
        function nonceBitmap(address owner, uint256 wordPos) external view returns (uint256);
    }

    interface IErc20Allowance {
        function allowance(address owner, address spender) external view returns (uint256);
    }

    /// A payer's EIP-2612 permit letting Permit2 move its tokens, as the proxy takes it.
    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    interface IUptoProxy {
        function settle(PermitTransferFrom permit, uint256 amount, address owner, Witness witness, bytes signature)
            external;
        function settleWithPermit(
            EIP2612Permit permit2612,
            PermitTransferFrom permit,
            uint256 amount,
            address owner,
            Witness witness,
            bytes signature
        ) external;
    }
}

/// A Permit2 witness transfer signed by `from`: `(from, nonce)` is its identity.
#[derive(Debug, Clone, PartialEq)]
pub struct PermitAuthorization {
    pub from: Address,
    pub token: Address,
    /// The most it lets be taken.
    pub max: U256,
    pub spender: Address,
    pub nonce: U256,
    pub deadline: U256,
    pub to: Address,
    pub facilitator: Address,
    pub valid_after: U256,
    pub signature: PayerSignature,
    /// The payer's EIP-2612 permit for Permit2 (x402's `eip2612GasSponsoring`), submitted
    /// with the settlement when the payer has not approved Permit2 itself.
    pub approval: Option<Eip2612Approval>,
}

/// A payer's signed EIP-2612 permit letting Permit2 move `value` of its USDC until
/// `deadline`: its one-time approval, given in the settlement's own transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Eip2612Approval {
    pub value: U256,
    pub deadline: U256,
    pub v: u8,
    pub r: alloy::primitives::B256,
    pub s: alloy::primitives::B256,
}

/// Permit2's EIP-712 domain on a chain (it has no version).
pub fn permit2_domain(chain_id: u64) -> Eip712Domain {
    Eip712Domain::new(
        Some("Permit2".into()),
        None,
        Some(U256::from(chain_id)),
        Some(PERMIT2),
        None,
    )
}

impl PermitAuthorization {
    /// The EIP-712 digest the payer signs on a chain.
    pub fn signing_hash(&self, chain_id: u64) -> alloy::primitives::B256 {
        self.message().eip712_signing_hash(&permit2_domain(chain_id))
    }

    fn message(&self) -> PermitWitnessTransferFrom {
        PermitWitnessTransferFrom {
            permitted: self.permitted(),
            spender: self.spender,
            nonce: self.nonce,
            deadline: self.deadline,
            witness: self.witness(),
        }
    }

    fn permitted(&self) -> TokenPermissions {
        TokenPermissions {
            token: self.token,
            amount: self.max,
        }
    }

    fn witness(&self) -> Witness {
        Witness {
            to: self.to,
            facilitator: self.facilitator,
            validAfter: self.valid_after,
        }
    }

    /// The proxy's `settle` for `amount` (at most the maximum), as the facilitator sends it;
    /// `settleWithPermit` when the payer's permit for Permit2 comes with it.
    fn settle_call(&self, amount: U256) -> Vec<u8> {
        let permit = PermitTransferFrom {
            permitted: self.permitted(),
            nonce: self.nonce,
            deadline: self.deadline,
        };
        let (owner, witness, signature) = (self.from, self.witness(), self.signature.checked_bytes());
        match &self.approval {
            None => IUptoProxy::settleCall {
                permit,
                amount,
                owner,
                witness,
                signature,
            }
            .abi_encode(),
            Some(approval) => IUptoProxy::settleWithPermitCall {
                permit2612: EIP2612Permit {
                    value: approval.value,
                    deadline: approval.deadline,
                    r: approval.r,
                    s: approval.s,
                    v: approval.v,
                },
                permit,
                amount,
                owner,
                witness,
                signature,
            }
            .abi_encode(),
        }
    }
}

impl BaseChain {
    /// Whether Permit2 has used `nonce` of `owner` (its unordered nonces: one bit each).
    pub async fn permit2_nonce_used(&self, owner: Address, nonce: U256) -> Result<bool, ChainError> {
        let word = self
            .call(
                PERMIT2,
                IPermit2::nonceBitmapCall {
                    owner,
                    wordPos: nonce >> 8,
                }
                .abi_encode(),
            )
            .await?;
        let bitmap = word_of(&word, "nonceBitmap on Permit2")?;
        let bit = U256::from(1) << (nonce & U256::from(0xff)).to::<usize>();
        Ok(bitmap & bit != U256::ZERO)
    }

    /// What `owner` lets Permit2 move of its USDC (the one-time approval).
    pub async fn permit2_allowance(&self, owner: Address) -> Result<U256, ChainError> {
        let word = self
            .call(
                self.usdc(),
                IErc20Allowance::allowanceCall {
                    owner,
                    spender: PERMIT2,
                }
                .abi_encode(),
            )
            .await?;
        word_of(&word, "allowance on the USDC contract")
    }

    /// Simulates the proxy call that takes `amount` under `auth`, as `settler` (a
    /// facilitator's address) would send it, within the gas cap: `Refused` when it would
    /// revert (a permit for Permit2 that does not pass, say) or cost more.
    pub async fn simulate_upto_settlement(
        &self,
        settler: Address,
        auth: &PermitAuthorization,
        amount: U256,
    ) -> Result<(), ChainError> {
        let call = auth.settle_call(amount);
        self.estimate_gas(
            settler,
            alloy::primitives::TxKind::Call(UPTO_PROXY),
            &call,
            self.caps.gas,
        )
        .await
        .map(|_| ())
    }

    /// Signs, as `facilitator` (the witness's, who pays the gas), the proxy call that takes
    /// `amount` under `auth`.
    pub async fn sign_upto_settlement(
        &self,
        facilitator: &WalletKey,
        auth: &PermitAuthorization,
        amount: U256,
    ) -> Result<SignedTx, ChainError> {
        let WalletKey::Base(signer) = facilitator else {
            return Err(ChainError::Refused("not a Base wallet key".into()));
        };
        let mut signed = self.sign_call(signer, UPTO_PROXY, auth.settle_call(amount)).await?;
        // Permit2 refuses it once the deadline has passed.
        signed.valid_until = u64::try_from(auth.deadline).ok();
        Ok(signed)
    }
}

fn word_of(data: &[u8], what: &str) -> Result<U256, ChainError> {
    if data.len() != 32 {
        return Err(ChainError::Unavailable(format!(
            "{what} answered {} bytes; is the contract deployed?",
            data.len()
        )));
    }
    Ok(U256::from_be_slice(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_type_is_permit2s_with_the_upto_witness() {
        // Permit2 hashes its stub followed by the proxy's witness type string.
        let expected = concat!(
            "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,",
            "Witness witness)TokenPermissions(address token,uint256 amount)",
            "Witness(address to,address facilitator,uint256 validAfter)"
        );
        assert_eq!(PermitWitnessTransferFrom::eip712_encode_type(), expected);
    }
}
