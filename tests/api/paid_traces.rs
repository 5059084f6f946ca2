//! A paid request's trace, on each network and x402 version: the purchase, its settlement
//! and every node call under the request's span, so an operator can tell the chain's time
//! from ours. Real parts: Anvil and the Solana chain, payments signed as x402 clients sign
//! them, the OTLP receiver. Each request's time splits by its spans into the chain's (every
//! JSON-RPC call to the node, and the waits between them once the transaction is sent) and
//! ours (decode and verify, the store, signing, the plugin run, the answer).
//!
//! The suite pays two requests of each kind and checks the traces; `bench/paid-path.sh`
//! pays 30 (`PAID_PATH_REQUESTS`) and reads the printed table, the benchmark of our part.
//! Nothing here asserts a time.

use std::collections::HashMap;

use serde_json::json;

use crate::support::chains::{LocalBase, LocalSolana};
use crate::support::otlp::{OtlpReceiver, ReceivedSpan};
use crate::support::x402::*;
use crate::support::*;

const PRICE: u64 = 50_000;

/// Paid requests per network and version, after one to warm up.
fn requests() -> usize {
    std::env::var("PAID_PATH_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2)
        .max(1)
}

#[derive(Clone, Copy)]
enum Network {
    Base,
    Solana,
}

impl Network {
    fn name(self) -> &'static str {
        match self {
            Network::Base => "base",
            Network::Solana => "solana",
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paid_requests_trace_tells_the_chains_time_from_ours() {
    let requests = requests();
    let receiver = OtlpReceiver::start().await;
    let base = LocalBase::start().await;
    let solana = LocalSolana::start();
    let env = TestEnv::new()
        .with_envs(base.env())
        .with_envs(solana.env())
        .with_env("AGENT_HOST_OTLP_ENDPOINT", &receiver.endpoint())
        .with_env("AGENT_HOST_OTLP_TRUSTED_PEERS", "127.0.0.1")
        .with_env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .with_env("AGENT_HOST_LOG", "warn")
        .with_env("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE", "100000")
        .with_env("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE", "100000");
    env.create_account("acme", "free");
    env.apply_agent(&paid_manifest("seller"), "acme");
    let base_wallet = env.create_wallet("seller", "base");
    base.set_eth(&base_wallet, 10u128.pow(17)).await; // it relays: pays the gas
    let solana_wallet = env.create_wallet("seller", "solana");
    solana.set_sol(&solana_wallet, 1_000_000_000).await;
    solana.set_usdc(&solana_wallet, 0).await;
    let server = env.serve();
    let base_payer = alloy::signers::local::PrivateKeySigner::random();
    base.mint_usdc(&base_payer.address().to_checksum(None), 100 * PRICE * requests as u64)
        .await;
    let body = json!({ "command": "hello", "name": "Ann" });

    let mut rows = Vec::new();
    let mut nonce = 0u8;
    for network in [Network::Base, Network::Solana] {
        let url = server.url(&format!("/x402/{}/seller", network.name()));
        let offer = post_x402(&url, &body).await;
        let offered_v1 = offer.json()["accepts"][0].clone();
        let offered_v2 = payment_required(&offer)["accepts"][0].clone();
        for version in [1, 2] {
            let mut traces = Vec::new();
            for i in 0..=requests {
                let v1 = match network {
                    Network::Base => {
                        nonce += 1;
                        base_payment(&base_payer, &offered_v1, PRICE, nonce, 300)
                    }
                    Network::Solana => {
                        // A payer of its own per request: each transaction is then distinct.
                        let payer = solana_keypair::Keypair::new();
                        solana
                            .set_usdc(&solana_signer::Signer::pubkey(&payer).to_string(), PRICE)
                            .await;
                        solana_payment(&solana, &payer, &offered_v1, PRICE).await
                    }
                };
                let trace_id = format!("{:016x}{:016x}", rand_u64(), i);
                let traceparent = format!("00-{trace_id}-00f067aa0ba902b7-01");
                let request = client().post(&url).header("traceparent", &traceparent).json(&body);
                let request = match version {
                    1 => request.header("x-payment", &v1),
                    _ => request.header("payment-signature", as_v2(&v1, &offered_v2)),
                };
                let reply = send(request).await;
                assert_eq!(reply.status, 200, "{} v{version}: {}", network.name(), reply.text);
                // The first request of each kind warms up (connections, caches): not counted.
                if i > 0 {
                    traces.push(trace_id);
                }
            }
            rows.push((network.name(), version, traces));
        }
    }

    let last = rows.last().unwrap().2.last().unwrap().clone();
    let spans = receiver
        .wait_for("of the last request", |s| {
            s.trace_id == last && s.parent_span_id == "00f067aa0ba902b7"
        })
        .await;
    let mut by_trace: HashMap<&str, Vec<&ReceivedSpan>> = HashMap::new();
    for span in &spans {
        by_trace.entry(span.trace_id.as_str()).or_default().push(span);
    }
    println!("\npaid request, {requests} per row after one to warm up; medians in ms (p90)");
    println!(
        "{:<8} {:>2}  {:>14}  {:>14}  {:>14}  the parts of ours (median ms)",
        "network", "v", "whole request", "chain", "ours"
    );
    for (network, version, traces) in &rows {
        let mut whole = Vec::new();
        let mut chain = Vec::new();
        let mut ours = Vec::new();
        let mut parts: HashMap<String, Vec<f64>> = HashMap::new();
        for trace in traces {
            let spans = &by_trace[trace.as_str()];
            let root = spans
                .iter()
                .find(|s| s.parent_span_id == "00f067aa0ba902b7")
                .unwrap_or_else(|| panic!("no request span in trace {trace}"));
            // PAID_PATH_TREE=1: each row's last request as its span tree, to see the parts.
            if std::env::var("PAID_PATH_TREE").is_ok() && trace == traces.last().unwrap() {
                print_tree(spans, root, root.start_ns, 0);
            }
            let split = split(root, spans);
            let whole_ns = root.end_ns - root.start_ns;
            let names: Vec<&str> = split.ours_by_part.iter().map(|(n, _)| n.as_str()).collect();
            assert!(
                names.contains(&"settlement") && names.contains(&"plugin run"),
                "{network} v{version}: the request's parts are {names:?}"
            );
            let send = if *network == "base" {
                "eth_sendRawTransaction"
            } else {
                "sendTransaction"
            };
            assert!(
                spans
                    .iter()
                    .any(|s| s.attributes.get("rpc.method").map(String::as_str) == Some(send)),
                "{network} v{version}: no {send} in the trace"
            );
            assert!(
                split.chain_ns > 0 && split.chain_ns < whole_ns,
                "{network} v{version}: chain {} ns of {whole_ns}",
                split.chain_ns
            );
            whole.push(ms(root.end_ns - root.start_ns));
            chain.push(ms(split.chain_ns));
            ours.push(ms(root.end_ns - root.start_ns - split.chain_ns));
            for (name, ns) in split.ours_by_part {
                parts.entry(name).or_default().push(ms(ns));
            }
        }
        let mut parts: Vec<(String, f64)> = parts.into_iter().map(|(n, mut v)| (n, median(&mut v))).collect();
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        let parts: Vec<String> = parts.iter().map(|(n, v)| format!("{n} {v:.3}")).collect();
        println!(
            "{network:<8} {version:>2}  {:>14}  {:>14}  {:>14}  {}",
            summary(&mut whole),
            summary(&mut chain),
            summary(&mut ours),
            parts.join(", ")
        );
    }
}

/// A request's time on the chain, and ours by the parts its spans name.
struct Split {
    chain_ns: u64,
    ours_by_part: Vec<(String, u64)>,
}

/// The chain's time is every node call, and within a settlement whatever is not ours
/// (the waits between the calls that follow the transaction to confirmation). Ours is the
/// rest: each child of the request, less any chain time inside it.
fn split(root: &ReceivedSpan, spans: &[&ReceivedSpan]) -> Split {
    let mut chain = 0;
    let mut summed: Vec<(String, u64)> = Vec::new();
    let mut add = |name: &str, ns: u64| match summed.iter_mut().find(|(n, _)| n == name) {
        Some((_, total)) => *total += ns,
        None => summed.push((name.to_string(), ns)),
    };
    let mut in_children = 0;
    for child in parts(spans, root) {
        let whole = child.end_ns.saturating_sub(child.start_ns);
        let on_chain = chain_ns(child, spans);
        chain += on_chain;
        in_children += whole;
        add(&child.name, whole - on_chain);
    }
    add(
        "(between parts)",
        (root.end_ns - root.start_ns).saturating_sub(in_children),
    );
    Split {
        chain_ns: chain,
        ours_by_part: summed,
    }
}

/// The spans that name a request's parts: its children, looking through the span of work
/// it handed to a background task (the purchase runs there, so a dropped client cannot cut
/// a paid call), whose time is the sum of its parts.
fn parts<'a>(spans: &[&'a ReceivedSpan], parent: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    children(spans, parent)
        .into_iter()
        .flat_map(|child| match child.name.as_str() {
            "background" => parts(spans, child),
            _ => vec![child],
        })
        .collect()
}

fn children<'a>(spans: &[&'a ReceivedSpan], parent: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .copied()
        .filter(|s| s.parent_span_id == parent.span_id)
        .collect()
}

fn is_chain_call(span: &ReceivedSpan) -> bool {
    span.attributes.contains_key("rpc.method")
}

/// Time under `span` on the chain: a node call whole; in a settlement, its node calls and,
/// once the transaction is sent, the time between its parts (waiting for confirmation);
/// anything else, the chain time of its children. What a settlement does before it sends
/// (verify the payment, read the wallet, sign) is ours.
/// Node calls made side by side overlap: the sum is capped by the span's own time.
fn chain_ns(span: &ReceivedSpan, spans: &[&ReceivedSpan]) -> u64 {
    let whole = span.end_ns.saturating_sub(span.start_ns);
    if is_chain_call(span) {
        return whole;
    }
    let mut under = children(spans, span);
    let calls: u64 = under.iter().map(|c| chain_ns(c, spans)).sum();
    if span.name != "settlement" {
        return calls.min(whole);
    }
    under.sort_by_key(|c| c.start_ns);
    let sent = under.iter().position(|c| {
        c.attributes
            .get("rpc.method")
            .is_some_and(|m| m == "eth_sendRawTransaction" || m == "sendTransaction")
    });
    let waits: u64 = sent.map_or(0, |i| {
        under[i..]
            .windows(2)
            .map(|w| w[1].start_ns.saturating_sub(w[0].end_ns))
            .sum()
    });
    (calls + waits).min(whole)
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn summary(values: &mut [f64]) -> String {
    let median = median(values);
    let p90 = values[(values.len() * 9 / 10).min(values.len() - 1)];
    format!("{median:.3} ({p90:.3})")
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    hasher.finish()
}

/// `span` and what it holds, one line each: name, start after the request's, duration.
fn print_tree(spans: &[&ReceivedSpan], span: &ReceivedSpan, t0: u64, depth: usize) {
    println!(
        "{:indent$}{} +{:.3} {:.3} ms {:?}",
        "",
        span.name,
        ms(span.start_ns - t0),
        ms(span.end_ns - span.start_ns),
        span.attributes.get("rpc.method"),
        indent = depth * 2
    );
    let mut under = children(spans, span);
    under.sort_by_key(|s| s.start_ns);
    for child in under {
        print_tree(spans, child, t0, depth + 1);
    }
}
