//! Wallet keys: generated from the OS generator or imported, held only in memory while
//! signing, sealed at rest by the wallet service. `Debug` never shows the secret.

use alloy::primitives::B256;
use alloy::signers::local::PrivateKeySigner;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::domain::Network;

pub enum WalletKey {
    /// ed25519.
    Solana(Keypair),
    /// secp256k1.
    Base(PrivateKeySigner),
}

impl std::fmt::Debug for WalletKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WalletKey({} {})", self.network(), self.address())
    }
}

impl WalletKey {
    pub fn generate(network: Network) -> WalletKey {
        let mut seed = [0u8; 32];
        loop {
            crate::random::fill(&mut seed);
            if let Ok(key) = WalletKey::from_secret(network, &seed) {
                seed.fill(0);
                return key;
            }
            // A secp256k1 scalar outside the curve order: about 1 in 2^128; draw again.
        }
    }

    /// Reads a secret as wallets export it. Solana: the 64-byte keypair as base58 (what
    /// Phantom exports) or as a JSON array (a `solana-keygen` file), or a 32-byte seed.
    /// Base: the 32-byte private key as hex, with or without `0x`.
    pub fn import(network: Network, text: &str) -> Result<WalletKey, String> {
        let text = text.trim();
        let bytes = match network {
            Network::Solana if text.starts_with('[') => serde_json::from_str::<Vec<u8>>(text)
                .map_err(|_| "a JSON key file must be an array of byte values".to_string())?,
            Network::Solana => bs58::decode(text)
                .into_vec()
                .map_err(|_| "not base58 (expected a 64-byte keypair or 32-byte seed)".to_string())?,
            Network::Base => hex::decode(text.strip_prefix("0x").unwrap_or(text))
                .map_err(|_| "not hex (expected a 32-byte private key)".to_string())?,
        };
        WalletKey::from_secret(network, &bytes)
    }

    /// The inverse of [`WalletKey::secret`].
    pub fn from_secret(network: Network, bytes: &[u8]) -> Result<WalletKey, String> {
        match network {
            Network::Solana => match bytes.len() {
                32 => {
                    let mut seed = [0u8; 32];
                    seed.copy_from_slice(bytes);
                    Ok(WalletKey::Solana(Keypair::new_from_array(seed)))
                }
                64 => Keypair::try_from(bytes)
                    .map(WalletKey::Solana)
                    .map_err(|_| "the keypair's public half does not match its secret half".to_string()),
                n => Err(format!("a Solana key is 64 bytes (or a 32-byte seed), not {n}")),
            },
            Network::Base => {
                if bytes.len() != 32 {
                    return Err(format!("a Base private key is 32 bytes, not {}", bytes.len()));
                }
                PrivateKeySigner::from_bytes(&B256::from_slice(bytes))
                    .map(WalletKey::Base)
                    .map_err(|_| "not a valid secp256k1 private key".to_string())
            }
        }
    }

    /// The secret in its canonical form: the 32-byte seed (Solana) or private key (Base).
    pub fn secret(&self) -> Vec<u8> {
        match self {
            WalletKey::Solana(keypair) => keypair.secret_bytes().to_vec(),
            WalletKey::Base(signer) => signer.to_bytes().to_vec(),
        }
    }

    pub fn network(&self) -> Network {
        match self {
            WalletKey::Solana(_) => Network::Solana,
            WalletKey::Base(_) => Network::Base,
        }
    }

    /// Base58 on Solana, EIP-55 checksummed hex on Base.
    pub fn address(&self) -> String {
        match self {
            WalletKey::Solana(keypair) => keypair.pubkey().to_string(),
            WalletKey::Base(signer) => signer.address().to_checksum(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_round_trip_through_their_secret() {
        for network in [Network::Solana, Network::Base] {
            let key = WalletKey::generate(network);
            let again = WalletKey::from_secret(network, &key.secret()).unwrap();
            assert_eq!(key.address(), again.address());
            assert_ne!(key.address(), WalletKey::generate(network).address());
            assert!(!format!("{key:?}").contains(&hex::encode(key.secret())));
        }
    }

    #[test]
    fn imports_the_formats_wallets_export() {
        let key = WalletKey::generate(Network::Solana);
        let WalletKey::Solana(keypair) = &key else {
            unreachable!()
        };
        let full = keypair.to_bytes();
        let b58 = bs58::encode(full).into_string();
        let json = serde_json::to_string(&full.to_vec()).unwrap();
        for text in [b58.as_str(), json.as_str()] {
            assert_eq!(
                WalletKey::import(Network::Solana, text).unwrap().address(),
                key.address()
            );
        }
        let mut tampered = full;
        tampered[40] ^= 1;
        let err = WalletKey::import(Network::Solana, &bs58::encode(tampered).into_string()).unwrap_err();
        assert!(err.contains("does not match"), "{err}");

        // Anvil's first dev account.
        let base = WalletKey::import(
            Network::Base,
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        )
        .unwrap();
        assert_eq!(base.address(), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
        assert!(WalletKey::import(Network::Base, "0x1234").is_err());
        assert!(WalletKey::import(Network::Base, "zz").is_err());
    }
}
