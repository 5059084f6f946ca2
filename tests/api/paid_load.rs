//! Paid requests spread over one, two and three hosts sharing one PostgreSQL database, on
//! the local Base chain: every request is served once and settled once whichever host it
//! reached, and what the sellers hold adds up to the cent. Eight payers (`PAID_LOAD_PAYERS`)
//! pay at once, each its own requests in turn, to three sellers (`PAID_LOAD_SELLERS`; each its own wallet,
//! relaying its own settlements); the hosts join one by one under the same load.
//!
//! The suite pays a few requests a round; `bench/several-hosts.sh` pays more
//! (`PAID_LOAD_REQUESTS` a round) and reads the printed lines: paid requests a second, the
//! CPU the hosts, the database and the chain used, and what they use idle. Nothing here
//! asserts a time.

use std::time::Instant;

use serde_json::{Value, json};

use crate::several_hosts::three_hosts;
use crate::support::chains::LocalBase;
use crate::support::x402::*;
use crate::support::*;

fn setting(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|n| n.parse().ok())
}

/// Sellers, payers paying at once, and paid requests per round (one per count of hosts).
fn load() -> (Vec<String>, usize, usize) {
    let sellers = setting("PAID_LOAD_SELLERS").unwrap_or(3).clamp(1, 32);
    let sellers = (1..=sellers).map(|i| format!("seller{i}")).collect();
    let payers = setting("PAID_LOAD_PAYERS").unwrap_or(8).clamp(1, 64);
    // Each payer's nonces are one byte, three rounds of them.
    let requests = setting("PAID_LOAD_REQUESTS").unwrap_or(12).clamp(payers, payers * 80);
    (sellers, payers, requests)
}

/// CPU ticks (1/100 s) used so far by the processes `pids` (the hosts), by every PostgreSQL
/// process, by the chain's node and by the whole machine (this test's payers among them).
fn cpu_ticks(pids: &[u32]) -> [u64; 4] {
    let ticks = |stat: &str| -> u64 {
        // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        let rest = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.get(11).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0)
            + fields.get(12).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0)
    };
    let mut used = [0; 4];
    let machine = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let busy = machine
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse::<u64>().unwrap_or(0));
    // user, nice, system, then idle and iowait (not busy), irq, softirq, steal.
    used[3] = busy
        .enumerate()
        .filter(|(i, _)| ![3, 4].contains(i))
        .take(6)
        .map(|(_, t)| t)
        .sum();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let of = if pids.contains(&pid) {
            0
        } else if stat.contains("(postgres)") {
            1
        } else if stat.contains("(anvil)") {
            2
        } else {
            continue;
        };
        used[of] += ticks(&stat);
    }
    used
}

#[tokio::test(flavor = "multi_thread")]
async fn paid_requests_through_several_hosts_are_each_settled_once() {
    let chain = LocalBase::start().await;
    let Some((a, b, c)) = three_hosts(vec![
        ("AGENT_HOST_BASE_RPC_URL", chain.rpc_url.clone()),
        ("AGENT_HOST_BASE_CONFIRMATIONS", "1".into()),
        ("AGENT_HOST_LOG", "warn".into()),
        // Recovery passes run among the paid requests, as they would over a long day.
        ("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1".into()),
        ("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "100000".into()),
        ("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "100000".into()),
    ]) else {
        return;
    };
    let (sellers, payers_at_once, per_round) = load();
    let measuring = setting("PAID_LOAD_REQUESTS").is_some();
    a.create_account("acme", "free");
    let mut wallets = Vec::new();
    for seller in &sellers {
        a.apply_agent(&paid_manifest(seller), "acme");
        let wallet = a.create_wallet(seller, "base");
        chain.set_eth(&wallet, 10u128.pow(18)).await;
        wallets.push(wallet);
    }
    let mut payers = Vec::new();
    for _ in 0..payers_at_once {
        payers.push(base_payer(&chain, 100_000_000).await.0);
    }

    let mut hosts = vec![a.serve()];
    let body = json!({ "command": "hello", "name": "Ann" });
    let mut offers = Vec::new();
    for seller in &sellers {
        let offer = post_x402(&hosts[0].url(&format!("/x402/base/{seller}")), &body).await;
        offers.push(offer.json()["accepts"][0].clone());
    }
    let price: u64 = offers[0]["maxAmountRequired"].as_str().unwrap().parse().unwrap();

    let mut served_in_all = 0u64;
    let mut next_nonce = vec![0u8; payers_at_once];
    for round in 1..=3 {
        if round > 1 {
            hosts.push(if round == 2 { b.serve() } else { c.serve() });
        }
        let bases: Vec<String> = hosts.iter().map(|h| h.base.clone()).collect();
        let pids: Vec<u32> = hosts.iter().map(|h| h.pid()).collect();
        if measuring {
            // What the hosts and the database use with nothing to do (their pollers).
            let before = cpu_ticks(&pids);
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            let after = cpu_ticks(&pids);
            let cores = |of: usize| after[of].saturating_sub(before[of]) as f64 / 300.0;
            println!(
                "{round} host(s), idle: cores used: hosts {:.2}, database {:.2}, chain {:.2}, machine {:.2}",
                cores(0),
                cores(1),
                cores(2),
                cores(3)
            );
        }
        let before = cpu_ticks(&pids);
        let started = Instant::now();
        // Payer p pays requests p, p + payers_at_once, ... in turn; request i goes to host i mod
        // hosts and seller i mod sellers.
        let workers = (0..payers_at_once).map(|p| {
            let payer = payers[p].clone();
            let bases = bases.clone();
            let offers = offers.clone();
            let body = body.clone();
            let sellers = sellers.clone();
            let first_nonce = next_nonce[p];
            async move {
                let mut replies: Vec<(usize, Reply)> = Vec::new();
                for (nonce, i) in (first_nonce..).zip((p..per_round).step_by(payers_at_once)) {
                    let offer: &Value = &offers[i % sellers.len()];
                    let payment = base_payment(&payer, offer, price, nonce, 300);
                    let host = i % bases.len();
                    let url = format!("{}/x402/base/{}", bases[host], sellers[i % sellers.len()]);
                    replies.push((host, paid(&url, &body, &payment).await));
                }
                replies
            }
        });
        let replies: Vec<(usize, Reply)> = all_at_once(workers).await.into_iter().flatten().collect();
        let elapsed = started.elapsed();
        let after = cpu_ticks(&pids);
        for (p, nonce) in next_nonce.iter_mut().enumerate() {
            *nonce += (p..per_round).step_by(payers_at_once).count() as u8;
        }

        for (host, reply) in &replies {
            assert_eq!(reply.status, 200, "host {host}: {}", reply.text);
        }
        served_in_all += replies.len() as u64;
        let secs = elapsed.as_secs_f64();
        let cores = |of: usize| after[of].saturating_sub(before[of]) as f64 / 100.0 / secs;
        println!(
            "{round} host(s): {} paid requests in {secs:.2} s, {:.1} a second; cores used: hosts {:.2}, database {:.2}, chain {:.2}, machine {:.2}",
            replies.len(),
            replies.len() as f64 / secs,
            cores(0),
            cores(1),
            cores(2),
            cores(3),
        );
    }

    // Once each, after every host's recovery has passed over them twice: as many served
    // payments as answered requests, no refund, and exactly their price moved.
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let served = a.sql("SELECT COUNT(*), COUNT(DISTINCT transaction_signature) FROM payments WHERE state = 'served'");
    let paid_text = Some(served_in_all.to_string());
    assert_eq!(
        served[0],
        vec![paid_text.clone(), paid_text],
        "each served, each its own transfer: {:?}",
        a.sql("SELECT id, state, error FROM payments WHERE state <> 'served'")
    );
    let refunds = a.sql("SELECT COUNT(*) FROM transfers WHERE kind = 'refund'");
    assert_eq!(refunds[0][0].as_deref(), Some("0"), "nobody was refunded");
    let mut held = 0;
    for wallet in &wallets {
        held += chain.usdc_of(wallet).await;
    }
    assert_eq!(held, served_in_all * price, "the sellers hold exactly what was paid");
    let mut left = 0;
    for payer in &payers {
        left += chain.usdc_of(&payer.address().to_checksum(None)).await;
    }
    assert_eq!(left, payers_at_once as u64 * 100_000_000 - served_in_all * price);
}
