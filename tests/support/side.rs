//! A paid test's network, so one test body pins a rule on Base (Anvil with FiatTokenV2_2)
//! and on Solana (Surfpool) alike.

use serde_json::Value;

use super::TestEnv;
use super::chains::{LocalBase, LocalSolana};
use super::x402::{base_shop, solana_shop};

/// One network's side of a paid test: its chain, the payer, and how it pays. Tests that
/// pin a money rule on both chains take one of each.
pub enum Side {
    Base(LocalBase, alloy::signers::local::PrivateKeySigner),
    Solana(LocalSolana, solana_keypair::Keypair),
}

impl Side {
    pub async fn start(network: &str) -> Side {
        match network {
            "base" => Side::Base(
                LocalBase::start().await,
                alloy::signers::local::PrivateKeySigner::random(),
            ),
            _ => Side::Solana(LocalSolana::start(), solana_keypair::Keypair::new()),
        }
    }

    pub fn payer(&self) -> String {
        use solana_signer::Signer;
        match self {
            Side::Base(_, key) => key.address().to_checksum(None),
            Side::Solana(_, key) => key.pubkey().to_string(),
        }
    }

    pub async fn usdc_of(&self, owner: &str) -> u64 {
        match self {
            Side::Base(chain, _) => chain.usdc_of(owner).await,
            Side::Solana(chain, _) => chain.usdc_of(owner).await.unwrap_or(0),
        }
    }

    /// A seller with a funded wallet, and a payer holding `micro` USDC.
    pub async fn shop(&self, env: TestEnv, manifest_extra: &str, micro: u64) -> (TestEnv, String) {
        let shop = match self {
            Side::Base(chain, _) => base_shop(chain, env, manifest_extra).await,
            Side::Solana(chain, _) => solana_shop(chain, env, manifest_extra).await,
        };
        match self {
            Side::Base(chain, _) if micro > 0 => chain.mint_usdc(&self.payer(), micro).await,
            Side::Base(..) => {} // USDC refuses to mint nothing
            Side::Solana(chain, _) => chain.set_usdc(&self.payer(), micro).await,
        }
        shop
    }

    /// A payment of `amount` for `requirement`, distinct for each `n`, valid for
    /// `valid_for` seconds where the network says (Base).
    pub async fn payment(&self, requirement: &Value, amount: u64, n: u8, valid_for: u64) -> String {
        match self {
            Side::Base(_, key) => super::x402::base_payment(key, requirement, amount, n, valid_for),
            Side::Solana(chain, key) => {
                use solana_signer::Signer;
                let mut instructions = super::x402::solana_instructions(&key.pubkey(), requirement, amount);
                let mut limit = vec![2];
                limit.extend_from_slice(&(20_000 + u32::from(n)).to_le_bytes());
                instructions[0] =
                    solana_instruction::Instruction::new_with_bytes(super::x402::COMPUTE_BUDGET, &limit, vec![]);
                super::x402::solana_envelope(
                    &super::x402::solana_key(&requirement["extra"]["feePayer"]),
                    &instructions,
                    &[key],
                    super::x402::latest_blockhash(chain).await,
                    false,
                )
            }
        }
    }

    /// Gives the agent's `wallet` what it pays fees with (Base: 0.01 ETH; Solana: 1 SOL),
    /// or takes it all away.
    pub async fn fund_fees(&self, wallet: &str, funded: bool) {
        match self {
            Side::Base(chain, _) => chain.set_eth(wallet, if funded { 10u128.pow(16) } else { 0 }).await,
            Side::Solana(chain, _) => chain.set_sol(wallet, if funded { 1_000_000_000 } else { 0 }).await,
        }
    }
}
