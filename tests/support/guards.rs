//! Wallet guards on the local Solana chain. Phantom and Solflare add Lighthouse assertion
//! instructions to the transactions they sign; Lighthouse's program build is in no package
//! registry this machine reaches, so a stand-in is placed at Lighthouse's address: a real
//! sBPF program, assembled here, that makes one assertion as Lighthouse's do (the first
//! account it is given still holds lamports) and fails the transaction otherwise. The host
//! knows Lighthouse by its address only, so it meets the stand-in exactly as it would meet
//! Lighthouse.
//!
//! `ChangingRelay` stands in for what makes a guard fail on chain after it passed the host's
//! simulation: the state it asserts changed before the transaction was executed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use solana_instruction::{AccountMeta, Instruction};
use solana_pubkey::Pubkey;

use super::chains::{LocalSolana, rpc};

pub const LIGHTHOUSE: Pubkey = Pubkey::from_str_const("L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95");

/// The guard's code, sBPF v0: `r2 = lamports of the first account (input + 80)`; return 0
/// when r2 != 0, else 1 (`Custom(1)`, the assertion failed).
const GUARD_TEXT: [[u8; 8]; 5] = [
    [0x79, 0x12, 80, 0, 0, 0, 0, 0], // ldxdw r2, [r1 + 80]
    [0xb7, 0x00, 0, 0, 0, 0, 0, 0],  // mov64 r0, 0
    [0x55, 0x02, 1, 0, 0, 0, 0, 0],  // jne r2, 0, +1
    [0xb7, 0x00, 0, 0, 1, 0, 0, 0],  // mov64 r0, 1
    [0x95, 0x00, 0, 0, 0, 0, 0, 0],  // exit
];

/// A minimal SBF ELF around `text`: one loadable segment (`.text`, at 0x78, the entry
/// point) and the section names, the layout the chain's loader accepts for sBPF v0.
fn elf(text: &[u8]) -> Vec<u8> {
    const TEXT_AT: u64 = 0x78;
    let names = b"\0.text\0.shstrtab\0";
    let names_at = TEXT_AT + text.len() as u64;
    let sections_at = (names_at + names.len() as u64).next_multiple_of(8);
    let mut out = Vec::new();
    let u16s = |out: &mut Vec<u8>, v: u16| out.extend_from_slice(&v.to_le_bytes());
    let u32s = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    let u64s = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
    // ELF header: 64-bit, little endian, ET_DYN, EM_SBPF.
    out.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    u16s(&mut out, 3);
    u16s(&mut out, 0x107);
    u32s(&mut out, 1);
    u64s(&mut out, TEXT_AT); // entry
    u64s(&mut out, 0x40); // program headers
    u64s(&mut out, sections_at); // section headers
    u32s(&mut out, 0); // flags: sBPF v0
    for v in [64, 56, 1, 64, 3, 2] {
        u16s(&mut out, v); // header size, ph size, ph count, sh size, sh count, names index
    }
    // PT_LOAD, read + execute, the text.
    u32s(&mut out, 1);
    u32s(&mut out, 5);
    for v in [TEXT_AT, TEXT_AT, TEXT_AT, text.len() as u64, text.len() as u64, 8] {
        u64s(&mut out, v);
    }
    out.extend_from_slice(text);
    out.extend_from_slice(names);
    out.resize(sections_at as usize, 0);
    // Section headers: null, .text, .shstrtab.
    let section = |out: &mut Vec<u8>, name: u32, kind: u32, flags: u64, addr: u64, at: u64, size: u64, align: u64| {
        u32s(out, name);
        u32s(out, kind);
        for v in [flags, addr, at, size] {
            u64s(out, v);
        }
        u32s(out, 0);
        u32s(out, 0);
        u64s(out, align);
        u64s(out, 0);
    };
    section(&mut out, 0, 0, 0, 0, 0, 0, 0);
    section(&mut out, 1, 1, 6, TEXT_AT, TEXT_AT, text.len() as u64, 8);
    section(&mut out, 7, 3, 0, 0, names_at, names.len() as u64, 1);
    out
}

/// Places the stand-in guard program at `program` (Lighthouse's address, or another).
pub async fn place_guard_program(chain: &LocalSolana, program: &Pubkey) {
    let code = elf(&GUARD_TEXT.concat());
    rpc(
        &chain.rpc_url,
        "surfnet_writeProgram",
        json!([program.to_string(), hex::encode(code), 0]),
    )
    .await;
}

/// A guard instruction asserting that `account` still holds lamports, as a wallet adds it.
pub fn guard(account: &Pubkey) -> Instruction {
    guard_of(&LIGHTHOUSE, account)
}

pub fn guard_of(program: &Pubkey, account: &Pubkey) -> Instruction {
    Instruction::new_with_bytes(*program, &[], vec![AccountMeta::new_readonly(*account, false)])
}

/// A relay in front of the chain's node that, before the first transaction sent through it,
/// empties `account` (what a guard asserts changes after the host's simulation), then
/// hands the transaction to the chain without the node's own preflight, as a leader
/// executes what it is given.
pub struct ChangingRelay {
    pub rpc_url: String,
    changed: Arc<AtomicBool>,
    _server: super::FakeServer,
}

impl ChangingRelay {
    pub async fn start(chain: &LocalSolana, account: Pubkey) -> ChangingRelay {
        let changed = Arc::new(AtomicBool::new(false));
        let (once, node) = (changed.clone(), chain.rpc_url.clone());
        let router = axum::Router::new().route(
            "/",
            axum::routing::post(move |axum::Json(mut call): axum::Json<Value>| {
                let (once, node) = (once.clone(), node.clone());
                async move {
                    if call["method"] == "sendTransaction" && !once.swap(true, Ordering::SeqCst) {
                        rpc(
                            &node,
                            "surfnet_setAccount",
                            json!([account.to_string(), { "lamports": 0 }]),
                        )
                        .await;
                        call["params"][1]["skipPreflight"] = json!(true);
                    }
                    axum::Json(super::post_for_json(&node, &call).await)
                }
            }),
        );
        let server = super::FakeServer::start(router).await;
        ChangingRelay {
            rpc_url: server.base.clone(),
            changed,
            _server: server,
        }
    }

    /// Whether a transaction went through it (and the account was emptied).
    pub fn changed(&self) -> bool {
        self.changed.load(Ordering::SeqCst)
    }
}
