//! The public networks the service knows by name, and what each one fixes: the RPC default,
//! the USDC token and its EIP-712 domain, the chain id or genesis hash (so the CAIP-2 id is
//! known without asking a node), and explorer links. `custom` sets each value alone, with
//! mainnet's as the defaults. A value that contradicts the named network is refused, as is
//! a node that serves another chain than the one named.

use std::time::Duration;

use serde_json::json;

use super::Chains;
use crate::config::{BaseNetworkName, ChainSettings, SolanaNetworkName};

struct SolanaPreset {
    name: &'static str,
    rpc_url: &'static str,
    /// Circle issues no USDC on Solana testnet: there the operator names the token.
    usdc_mint: Option<&'static str>,
    cluster: &'static str,
    genesis_hash: &'static str,
}

const SOLANA_MAINNET: SolanaPreset = SolanaPreset {
    name: "mainnet",
    rpc_url: "https://api.mainnet-beta.solana.com",
    usdc_mint: Some("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"),
    cluster: "mainnet-beta",
    genesis_hash: "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d",
};

const SOLANA_DEVNET: SolanaPreset = SolanaPreset {
    name: "devnet",
    rpc_url: "https://api.devnet.solana.com",
    usdc_mint: Some("4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"),
    cluster: "devnet",
    genesis_hash: "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG",
};

const SOLANA_TESTNET: SolanaPreset = SolanaPreset {
    name: "testnet",
    rpc_url: "https://api.testnet.solana.com",
    usdc_mint: None,
    cluster: "testnet",
    genesis_hash: "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY",
};

const SOLANA_EXPLORER_ADDRESS: &str = "https://explorer.solana.com/address/{address}?cluster={cluster}";
const SOLANA_EXPLORER_TX: &str = "https://explorer.solana.com/tx/{signature}?cluster={cluster}";

struct BasePreset {
    name: &'static str,
    rpc_url: &'static str,
    chain_id: u64,
    usdc_address: &'static str,
    eip712_name: &'static str,
    eip712_version: &'static str,
    explorer: &'static str,
}

const BASE_MAINNET: BasePreset = BasePreset {
    name: "mainnet",
    rpc_url: "https://mainnet.base.org",
    chain_id: 8453,
    usdc_address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    eip712_name: "USD Coin",
    eip712_version: "2",
    explorer: "https://basescan.org",
};

const BASE_SEPOLIA: BasePreset = BasePreset {
    name: "sepolia",
    rpc_url: "https://sepolia.base.org",
    chain_id: 84532,
    usdc_address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    eip712_name: "USDC",
    eip712_version: "2",
    explorer: "https://sepolia.basescan.org",
};

/// The Solana chain as configured, every value decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SolanaNetwork {
    pub rpc_url: String,
    pub usdc_mint: String,
    pub cluster: String,
    /// The CAIP-2 id when known without a node (a named network, or set for a custom one).
    pub network_id: Option<String>,
    /// What the node's `getGenesisHash` must answer; `None` for a custom network.
    pub genesis_hash: Option<&'static str>,
    /// Whether the operator chose the node (the named network's public one needs no check).
    pub rpc_given: bool,
    pub explorer_address_url: String,
    pub explorer_tx_url: String,
}

/// The Base chain as configured, every value decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseNetwork {
    pub rpc_url: String,
    pub chain_id: u64,
    pub usdc_address: String,
    pub eip712_name: String,
    pub eip712_version: String,
    /// Whether the chain id is a named network's, which the node must then serve.
    pub named: bool,
    /// Whether the operator chose the node (the named network's public one needs no check).
    pub rpc_given: bool,
    pub explorer_address_url: String,
    pub explorer_tx_url: String,
}

/// A value the named network fixes may be given only as that network has it (an address
/// in any letter case).
fn fixed<T: PartialEq + std::fmt::Display>(
    setting: &str,
    given: Option<T>,
    preset: T,
    network: (&str, &str),
) -> Result<T, String> {
    let same = |value: &T| value == &preset || value.to_string().eq_ignore_ascii_case(&preset.to_string());
    match given {
        Some(value) if !same(&value) => Err(format!(
            "{setting} = {value} contradicts {} = {} (whose value is {preset}); set {} = custom to choose every value yourself",
            network.0, network.1, network.0
        )),
        _ => Ok(preset),
    }
}

pub fn solana(settings: &ChainSettings) -> Result<SolanaNetwork, String> {
    let preset = match settings.solana_network {
        SolanaNetworkName::Mainnet => &SOLANA_MAINNET,
        SolanaNetworkName::Devnet => &SOLANA_DEVNET,
        SolanaNetworkName::Testnet => &SOLANA_TESTNET,
        SolanaNetworkName::Custom => return Ok(custom_solana(settings)),
    };
    let network = ("solana_network", preset.name);
    if settings.solana_network_id.is_some() {
        return Err(format!(
            "solana_network_id is for a custom network; solana_network = {} has its own",
            preset.name
        ));
    }
    let usdc_mint = match preset.usdc_mint {
        Some(mint) => fixed("solana_usdc_mint", settings.solana_usdc_mint.as_deref(), mint, network)?.to_string(),
        None => settings.solana_usdc_mint.clone().ok_or_else(|| {
            format!(
                "solana_network = {}: Circle issues no USDC there, so set solana_usdc_mint to the token you use",
                preset.name
            )
        })?,
    };
    Ok(SolanaNetwork {
        rpc_url: settings.solana_rpc_url.clone().unwrap_or_else(|| preset.rpc_url.into()),
        usdc_mint,
        cluster: fixed(
            "solana_cluster",
            settings.solana_cluster.as_deref(),
            preset.cluster,
            network,
        )?
        .into(),
        network_id: Some(super::solana::caip2_of_genesis(preset.genesis_hash)),
        genesis_hash: Some(preset.genesis_hash),
        rpc_given: settings.solana_rpc_url.is_some(),
        explorer_address_url: or(&settings.solana_explorer_address_url, SOLANA_EXPLORER_ADDRESS),
        explorer_tx_url: or(&settings.solana_explorer_tx_url, SOLANA_EXPLORER_TX),
    })
}

/// Each value as set, mainnet's where unset; the CAIP-2 id as set, or asked of the node.
fn custom_solana(settings: &ChainSettings) -> SolanaNetwork {
    let mainnet = &SOLANA_MAINNET;
    SolanaNetwork {
        rpc_url: or(&settings.solana_rpc_url, mainnet.rpc_url),
        usdc_mint: or(&settings.solana_usdc_mint, mainnet.usdc_mint.unwrap_or_default()),
        cluster: or(&settings.solana_cluster, mainnet.cluster),
        network_id: settings.solana_network_id.clone(),
        genesis_hash: None,
        rpc_given: settings.solana_rpc_url.is_some(),
        explorer_address_url: or(&settings.solana_explorer_address_url, SOLANA_EXPLORER_ADDRESS),
        explorer_tx_url: or(&settings.solana_explorer_tx_url, SOLANA_EXPLORER_TX),
    }
}

pub fn base(settings: &ChainSettings) -> Result<BaseNetwork, String> {
    let (preset, named) = match settings.base_network {
        BaseNetworkName::Mainnet => (&BASE_MAINNET, true),
        BaseNetworkName::Sepolia => (&BASE_SEPOLIA, true),
        BaseNetworkName::Custom => (&BASE_MAINNET, false),
    };
    let network = ("base_network", preset.name);
    // A custom network takes what is set; a named one refuses what contradicts it.
    let decide = |setting: &str, given: &Option<String>, value: &'static str| -> Result<String, String> {
        match named {
            true => fixed(setting, given.as_deref(), value, network).map(str::to_string),
            false => Ok(or(given, value)),
        }
    };
    let chain_id = match named {
        true => fixed("base_chain_id", settings.base_chain_id, preset.chain_id, network)?,
        false => settings.base_chain_id.unwrap_or(preset.chain_id),
    };
    Ok(BaseNetwork {
        rpc_url: or(&settings.base_rpc_url, preset.rpc_url),
        chain_id,
        usdc_address: decide("base_usdc_address", &settings.base_usdc_address, preset.usdc_address)?,
        eip712_name: decide(
            "base_usdc_eip712_name",
            &settings.base_usdc_eip712_name,
            preset.eip712_name,
        )?,
        eip712_version: decide(
            "base_usdc_eip712_version",
            &settings.base_usdc_eip712_version,
            preset.eip712_version,
        )?,
        named,
        rpc_given: settings.base_rpc_url.is_some(),
        explorer_address_url: settings
            .base_explorer_address_url
            .clone()
            .unwrap_or_else(|| format!("{}/address/{{address}}", preset.explorer)),
        explorer_tx_url: settings
            .base_explorer_tx_url
            .clone()
            .unwrap_or_else(|| format!("{}/tx/{{signature}}", preset.explorer)),
    })
}

/// How long a start waits for a node to name its chain; one that does not answer in time is
/// not a mismatch (the start goes on, and says so).
const NODE_CHECK_WAIT: Duration = Duration::from_secs(5);

impl Chains {
    /// Stops the start when a node the operator chose serves another chain than the named
    /// network: its genesis hash (Solana) or chain id (Base) is not the network's.
    pub async fn check_networks(&self) -> Result<(), String> {
        let (solana, base) = (&self.solana_network, &self.base_network);
        if let (Some(expected), true) = (solana.genesis_hash, solana.rpc_given) {
            let asked = self.solana.rpc().call::<String>("getGenesisHash", json!([]));
            match tokio::time::timeout(NODE_CHECK_WAIT, asked).await {
                Ok(Ok(genesis)) if genesis != expected => {
                    return Err(format!(
                        "the Solana node at solana_rpc_url serves the chain whose genesis hash is {genesis}, not {expected} as solana_network says; point solana_rpc_url at a node of that network, or set solana_network = custom"
                    ));
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!("the Solana node could not be asked which chain it serves: {e}"),
                Err(_) => tracing::warn!("the Solana node did not say in time which chain it serves"),
            }
        }
        if base.named && base.rpc_given {
            let asked = self.base.rpc().call::<String>("eth_chainId", json!([]));
            match tokio::time::timeout(NODE_CHECK_WAIT, asked).await {
                Ok(Ok(hex)) => {
                    let served = u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap_or(0);
                    if served != base.chain_id {
                        return Err(format!(
                            "the Base node at base_rpc_url serves chain id {served}, not {} as base_network says; point base_rpc_url at a node of that network, or set base_network = custom",
                            base.chain_id
                        ));
                    }
                }
                Ok(Err(e)) => tracing::warn!("the Base node could not be asked which chain it serves: {e}"),
                Err(_) => tracing::warn!("the Base node did not say in time which chain it serves"),
            }
        }
        Ok(())
    }
}

fn or(given: &Option<String>, default: &str) -> String {
    given.clone().unwrap_or_else(|| default.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn chains(pairs: &[(&str, &str)]) -> ChainSettings {
        let text: String = pairs.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        Settings::from_toml_for_tests(&text).unwrap().chains
    }

    #[test]
    fn a_named_network_fixes_its_values_and_knows_its_caip2_id() {
        let mainnet = solana(&chains(&[])).unwrap();
        assert_eq!(mainnet.usdc_mint, "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
        assert_eq!(
            mainnet.network_id.as_deref(),
            Some("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp")
        );
        let devnet = solana(&chains(&[("solana_network", "\"devnet\"")])).unwrap();
        assert_eq!(
            devnet.network_id.as_deref(),
            Some("solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1")
        );
        assert_eq!(devnet.rpc_url, "https://api.devnet.solana.com");
        assert_eq!(devnet.cluster, "devnet");

        let sepolia = base(&chains(&[("base_network", "\"sepolia\"")])).unwrap();
        assert_eq!((sepolia.chain_id, sepolia.eip712_name.as_str()), (84532, "USDC"));
        assert_eq!(sepolia.explorer_tx_url, "https://sepolia.basescan.org/tx/{signature}");
        // The node may be the operator's own.
        let own = base(&chains(&[("base_rpc_url", "\"https://rpc.example\"")])).unwrap();
        assert_eq!((own.rpc_url.as_str(), own.chain_id), ("https://rpc.example", 8453));
    }

    #[test]
    fn values_that_contradict_the_named_network_are_refused() {
        let error = base(&chains(&[("base_chain_id", "84532")])).unwrap_err();
        assert!(
            error.contains("base_chain_id = 84532 contradicts base_network = mainnet"),
            "{error}"
        );
        assert!(
            base(&chains(&[("base_chain_id", "8453")])).is_ok(),
            "the same value is fine"
        );
        let lower = "\"0x833589fcd6edb6e08f4c7c32d4f71b54bda02913\"";
        assert!(base(&chains(&[("base_usdc_address", lower)])).is_ok(), "in any case");
        let error = solana(&chains(&[
            ("solana_network", "\"devnet\""),
            ("solana_usdc_mint", "\"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v\""),
        ]))
        .unwrap_err();
        assert!(error.contains("set solana_network = custom"), "{error}");
        let error = solana(&chains(&[("solana_network", "\"testnet\"")])).unwrap_err();
        assert!(error.contains("set solana_usdc_mint"), "{error}");
        assert!(solana(&chains(&[("solana_network_id", "\"solana:abc\"")])).is_err());
    }

    #[test]
    fn custom_takes_each_value_as_set() {
        let local = solana(&chains(&[
            ("solana_network", "\"custom\""),
            ("solana_rpc_url", "\"http://127.0.0.1:8899\""),
        ]))
        .unwrap();
        assert_eq!(local.rpc_url, "http://127.0.0.1:8899");
        assert_eq!(local.network_id, None, "asked of the node");
        assert_eq!(local.genesis_hash, None, "nothing to check it against");
        let anvil = base(&chains(&[("base_network", "\"custom\""), ("base_chain_id", "31337")])).unwrap();
        assert_eq!((anvil.chain_id, anvil.named), (31337, false));
    }
}
