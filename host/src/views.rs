//! How the account's records are shown: the JSON that both `agent-host --json` and the
//! management API (`/v1/account/...`) answer with, written once. Times are ISO 8601,
//! amounts are micro-USDC integers beside their USDC number; secrets never appear.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::chains::Chains;
use crate::clock::iso;
use crate::domain::{Account, Agent, ApiKeyInfo, Command, Network, ParamSpec, ParamType};
use crate::manifest::AgentManifest;
use crate::plugins::{Inspection, describe};
use crate::services::agents;
use crate::services::keys::IssuedKey;
use crate::services::knowledge::Ranked;
use crate::services::payments::breaker;
use crate::store::{
    AccountPlugin, AgentSummary, AgentWithCommands, ApplyOutcome, Breaker, ChatUsageDay, Integration, JobRecord,
    PaymentRecord, PluginRun, TransferRecord, WalletAlert, WalletRecord, WebhookAttempt, WebhookDelivery,
    WebhookEndpoint,
};

pub fn account(a: &Account) -> Value {
    json!({
        "id": a.id, "name": a.name, "plan": a.plan,
        "rpm": a.limits.per_minute, "rpd": a.limits.per_day,
        "created_at": iso(a.created_at),
    })
}

/// An account's chat token budget and what is left of it.
pub fn chat_budget(budget: &crate::services::chat_budget::Standing) -> Value {
    json!({
        "per_minute": budget.limits.per_minute, "per_day": budget.limits.per_day,
        "left_this_minute": budget.left_this_minute, "left_today": budget.left_today,
    })
}

/// A paid command its breaker paused (see services/payments/breaker.rs): why, since when,
/// and in how many seconds a trial call may go through.
pub fn paused(b: &Breaker, rules: &breaker::Rules, now: i64) -> Value {
    let retry_after = match rules.look(Some(b), now, None) {
        breaker::Admission::Open { retry_after_secs, .. } => retry_after_secs,
        _ => 0,
    };
    json!({
        "agent_id": b.agent_id, "command": b.command, "reason": b.reason, "failures": b.failures,
        "paused_at": b.opened_at.map(iso), "retry_after_seconds": retry_after,
    })
}

/// Marks each paused command of a view's `commands` with its `paused` record.
pub fn mark_paused(view: &mut Value, paused: &[Breaker], rules: &breaker::Rules, now: i64) {
    let Some(commands) = view["commands"].as_array_mut() else {
        return;
    };
    for command in commands {
        if let Some(b) = paused.iter().find(|b| command["command"] == b.command.as_str()) {
            command["paused"] = self::paused(b, rules, now);
        }
    }
}

/// The account with its quotas and their use (`GET /v1/account`).
pub fn account_with_quotas(a: &Account, quotas: &crate::services::accounts::Quotas) -> Value {
    let quota = |q: &crate::services::accounts::Quota| json!({ "used": q.used, "limit": q.limit });
    let mut view = account(a);
    view["quotas"] = json!({
        "agents": quota(&quotas.agents),
        "commands_per_agent": quota(&quotas.commands_per_agent),
        "plugins": quota(&quotas.plugins),
        "plugin_bytes": quota(&quotas.plugin_bytes),
        "kv_bytes": quota(&quotas.kv_bytes),
    });
    view
}

pub fn key(k: &ApiKeyInfo) -> Value {
    json!({
        "id": k.id,
        "name": k.name,
        "scope": k.scope,
        "created_at": iso(k.created_at),
        "last_used_at": k.last_used_at.map(iso),
        "revoked_at": k.revoked_at.map(iso),
        "expires_at": k.expires_at.map(iso),
        "expired": k.expired(crate::clock::now_ms()),
        "active": k.active(crate::clock::now_ms()),
    })
}

/// An OAuth grant: which client may call which agent's tools as the account.
pub fn oauth_grant(g: &crate::store::GrantInfo) -> Value {
    json!({
        "id": g.id,
        "agent_id": g.agent_id,
        "client_id": g.client_id,
        "client_name": g.client_name,
        "resource": g.resource,
        "scope": g.scope,
        "created_at": iso(g.created_at),
        "last_used_at": g.last_used_at.map(iso),
        "revoked_at": g.revoked_at.map(iso),
    })
}

/// The one answer that holds a key's secret.
pub fn issued_key(issued: &IssuedKey, account: &Account) -> Value {
    json!({
        "key": issued.key, "id": issued.info.id, "name": issued.info.name, "scope": issued.info.scope,
        "expires_at": issued.info.expires_at.map(iso),
        "account": account.name,
    })
}

pub fn agent_summary(s: &AgentSummary) -> Value {
    json!({
        "id": s.agent.id, "username": s.agent.def.username, "name": s.agent.def.name,
        "account": s.account_name, "commands": s.command_count,
    })
}

pub fn agent(agent: &Agent, account_name: &str, commands: &[Command]) -> Value {
    json!({
        "id": agent.id,
        "username": agent.def.username,
        "name": agent.def.name,
        "account": account_name,
        "personality": agent.def.personality,
        "knowledge": agent.def.knowledge,
        "x402": {
            "enabled": agent.def.x402.enabled,
            "default_price_usd": agent.def.x402.default_price.map(|p| p.to_json_number()),
            "networks": agent.def.x402.networks,
        },
        "created_at": iso(agent.created_at),
        "updated_at": iso(agent.updated_at),
        "commands": commands.iter().map(|c| json!({
            "id": c.id, "command": c.def.name, "handler_type": c.def.handler_type.as_str(),
            "description": c.def.description, "enabled": c.def.enabled, "integrations": c.def.integrations,
            "price_usd": c.def.price.map(|p| p.to_json_number()), "parameters": c.def.parameters,
            "long_running": c.def.long_running,
            "plugin": c.def.plugin.as_ref().map(|hash| format!("{}{hash}", crate::manifest::HASH_PREFIX)),
        })).collect::<Vec<_>>(),
    })
}

pub fn applied(manifest: &AgentManifest, outcome: &ApplyOutcome) -> Value {
    json!({
        "id": outcome.agent_id,
        "username": manifest.agent.username,
        "created": outcome.created,
        "commands": outcome.command_ids.iter().map(|(name, id)| json!({ "command": name, "id": id })).collect::<Vec<_>>(),
        "removed_commands": outcome.removed_commands,
    })
}

/// An inspected or uploaded component: what `plugin inspect` prints.
pub fn inspection(inspection: &Inspection) -> Value {
    let mut value = describe(inspection);
    value["plugin"] = json!(format!("{}{}", crate::manifest::HASH_PREFIX, inspection.hash));
    value
}

pub fn account_plugin(p: &AccountPlugin) -> Value {
    json!({
        "hash": p.hash,
        "plugin": format!("{}{}", crate::manifest::HASH_PREFIX, p.hash),
        "size": p.size,
        "witVersion": p.wit_version,
        "manifest": p.manifest,
        "uploaded_at": iso(p.uploaded_at),
        "used_by_commands": p.used_by,
    })
}

/// A wallet's address, with where to see it and a payment request that funds it with USDC.
pub fn wallet(w: &WalletRecord, chains: &Chains) -> Value {
    json!({
        "network": w.network.as_str(), "address": w.address,
        "explorer_url": chains.explorer(w.network).address(&w.address),
        "funding_uri": chains.get(w.network).funding_uri(&w.address),
        "created_at": iso(w.created_at),
    })
}

/// `text` as a QR code in SVG, black on white with the standard quiet zone; `None` if
/// it is too long for any QR code.
pub fn qr_svg(text: &str) -> Option<String> {
    use qrcode::render::svg;
    let code = qrcode::QrCode::new(text.as_bytes()).ok()?;
    Some(
        code.render::<svg::Color<'_>>()
            .min_dimensions(240, 240)
            .dark_color(svg::Color("#000"))
            .light_color(svg::Color("#fff"))
            .build(),
    )
}

fn explorer_url(chains: &Chains, network: &str, signature: Option<&str>) -> Option<String> {
    let network = Network::parse(network)?;
    Some(chains.explorer(network).tx(signature?))
}

pub fn transfer(t: &TransferRecord, chains: &Chains) -> Value {
    json!({
        "id": t.id, "network": t.network.as_str(), "kind": t.kind, "state": t.state.as_str(),
        "amount_usdc": t.amount.to_json_number(), "amount_micro_usdc": t.amount.0,
        "sender": t.sender, "recipient": t.recipient, "memo": t.memo,
        "signature": t.signature, "error": t.error,
        "explorer_url": explorer_url(chains, t.network.as_str(), t.signature.as_deref()),
        "created_at": iso(t.created_at), "updated_at": iso(t.updated_at),
    })
}

pub fn payment(p: &PaymentRecord, chains: &Chains) -> Value {
    let mut view = json!({
        "id": p.id, "network": p.network, "state": p.state.as_str(), "command": p.command,
        "x402Version": p.x402_version,
        "receipt": {
            "amountPaidMicroUsdc": p.amount.0,
            "amountPaidUsdc": p.amount.to_json_number(),
            "transactionSignature": p.transaction_signature,
            "timestamp": iso(p.created_at),
            "payer": p.payer,
            "payTo": p.pay_to,
        },
        "explorer_url": explorer_url(chains, &p.network, p.transaction_signature.as_deref()),
        "job_id": p.job_id, "refund_transfer_id": p.refund_transfer_id, "error": p.error,
        "refund_attempts": p.refund_attempts,
        "needs_operator": p.needs_operator_at.map(|at| json!({ "since": iso(at), "why": p.needs_operator })),
        "updated_at": iso(p.updated_at),
    });
    if let Some(max) = p.max_amount {
        view["byUse"] = by_use(max, p.used.unwrap_or_default(), p.command.is_some());
    }
    view
}

/// What a payment charged by use (x402 `upto`) authorized and measured; its charge is the
/// receipt's amount.
/// What a payment by use authorized and used: a message's tokens, or a command's units.
pub fn by_use(max: crate::money::MicroUsdc, used: crate::domain::Used, command: bool) -> Value {
    match command {
        true => json!({ "maxAmountMicroUsdc": max.0, "units": used.units }),
        false => json!({
            "maxAmountMicroUsdc": max.0,
            "inputTokens": used.input_tokens,
            "outputTokens": used.output_tokens,
        }),
    }
}

/// The entries a message would bring into an agent's prompt, best first.
pub fn knowledge_ranking(message: &str, entries: &[String], ranked: &[Ranked]) -> Value {
    json!({
        "message": message,
        "entries": ranked.iter().map(|r| json!({
            "index": r.index, "entry": entries[r.index], "bm25": r.words, "cosine": r.meaning, "score": r.score,
        })).collect::<Vec<_>>(),
    })
}

/// An agent's chats by day, with their sum.
pub fn chat_usage(days: &[ChatUsageDay]) -> Value {
    let row = |day: Option<&str>, chats: u64, prompt: u64, completion: u64| {
        let mut row = json!({ "chats": chats, "prompt_tokens": prompt, "completion_tokens": completion });
        if let Some(day) = day {
            row["day"] = json!(day);
        }
        row
    };
    let total = days.iter().fold((0u64, 0u64, 0u64), |(c, p, o), d| {
        (
            c.saturating_add(d.chats),
            p.saturating_add(d.prompt_tokens),
            o.saturating_add(d.completion_tokens),
        )
    });
    json!({
        "days": days.iter().map(|d| row(Some(&d.day), d.chats, d.prompt_tokens, d.completion_tokens)).collect::<Vec<_>>(),
        "total": row(None, total.0, total.1, total.2),
    })
}

/// A job as its owner lists it: the status the API defines is at `/jobs/{id}`.
pub fn job(j: &JobRecord) -> Value {
    json!({
        "id": j.id, "command": j.command, "origin": j.origin, "state": j.state.as_str(),
        "progress": j.progress, "error": j.error, "code": j.code,
        "created_at": iso(j.created_at), "expires_at": iso(j.expires_at),
    })
}

/// A schedule as its owner reads it: what it does, when, where its answer goes, and where it
/// stands (its next time, how its last run ended).
pub fn schedule(s: &crate::store::ScheduleRecord) -> Value {
    use crate::domain::schedule::{Action, Delivery, Missed, Timing};
    let mut view = json!({
        "id": s.id, "name": s.def.name, "source": s.source, "status": s.status.as_str(),
        "stopped_reason": s.stopped_reason,
        "missed": match s.def.missed { Missed::CatchUp => "catch_up", Missed::Skip => "skip" },
        "next_run_at": s.next_run_at.map(iso), "last_run_at": s.last_run_at.map(iso),
        "last_outcome": s.last_outcome, "consecutive_failures": s.consecutive_failures,
        "created_at": iso(s.created_at),
    });
    match &s.def.timing {
        Timing::Once { at } => view["at"] = json!(iso(*at)),
        Timing::Every { seconds, .. } => view["every_seconds"] = json!(seconds),
        Timing::Cron { expression, timezone } => {
            view["cron"] = json!(expression);
            view["timezone"] = json!(timezone);
        }
    }
    match &s.def.action {
        Action::Command { command, parameters } => {
            view["command"] = json!(command);
            view["parameters"] = json!(parameters);
        }
        Action::Prompt { prompt } => view["prompt"] = json!(prompt),
    }
    view["deliver"] = match &s.def.delivery {
        Delivery::Telegram { chat_id } => json!({ "to": "telegram", "chat_id": chat_id }),
        other => json!({ "to": other.as_str() }),
    };
    view
}

/// A remote MCP server an agent uses as tools, as its owner sees it: never its credential.
pub fn remote_server(s: &crate::services::remote_tools::ServerStatus) -> Value {
    let (tools, error) = match &s.tools {
        Ok(tools) => (json!(tools), Value::Null),
        Err(why) => (json!([]), json!(why)),
    };
    json!({
        "name": s.def.name, "url": s.def.url, "include": s.def.include, "exclude": s.def.exclude,
        "header": s.def.header, "oauth": s.def.oauth, "credential_set": s.credential_set, "timeout_ms": s.def.timeout_ms,
        "max_calls": s.def.max_calls, "tools": tools, "error": error,
    })
}

/// One time a schedule came due, and how it went.
pub fn schedule_run(r: &crate::store::ScheduleRun) -> Value {
    json!({
        "id": r.id, "due_at": iso(r.due_at), "state": r.state.as_str(),
        "started_at": iso(r.started_at), "finished_at": r.finished_at.map(iso),
        "output": r.output, "error": r.error,
    })
}

/// A connected third-party account: whether it may be used, and its public side (the
/// bot's or the account's username and id); `null` when none is connected.
pub fn integration(connected: Option<&Integration>) -> Value {
    match connected {
        None => Value::Null,
        Some(i) => {
            let mut view = json!({ "enabled": i.enabled });
            if let (Some(out), Some(public)) = (view.as_object_mut(), i.public.as_object()) {
                out.extend(public.clone());
            }
            view
        }
    }
}

/// A kept plugin run: what it was asked, how it ended, how long it took, what it logged.
pub fn plugin_run(r: &PluginRun) -> Value {
    json!({
        "id": r.id, "command": r.command, "origin": r.origin,
        "started_at": iso(r.started_at), "duration_ms": r.duration_ms,
        "outcome": r.outcome, "error": r.error,
        "lines": r.lines.iter().map(|l| json!({ "at": iso(l.at), "level": l.level, "message": l.message })).collect::<Vec<_>>(),
    })
}

/// A webhook endpoint; its secret only where the owner asked for the one endpoint.
pub fn webhook_endpoint(e: &WebhookEndpoint, secret: Option<&str>) -> Value {
    let mut view = json!({
        "id": e.id, "url": e.url, "description": e.description, "events": e.events,
        "created_at": iso(e.created_at),
        "enabled": e.disabled_at.is_none(),
        "disabled_at": e.disabled_at.map(iso), "disabled_reason": e.disabled_reason,
        "consecutive_failures": e.consecutive_failures, "failing_since": e.failing_since.map(iso),
        "last_success_at": e.last_success_at.map(iso),
    });
    if let Some(secret) = secret {
        view["secret"] = json!(secret);
    }
    view
}

pub fn webhook_delivery(d: &WebhookDelivery) -> Value {
    json!({
        "id": d.id, "event_id": d.event_id, "event_type": d.event_type, "endpoint_id": d.endpoint_id,
        "state": d.state, "attempts": d.attempts,
        "next_attempt_at": (d.state == "pending").then(|| iso(d.next_attempt_at)),
        "last_status": d.last_status, "last_error": d.last_error, "last_latency_ms": d.last_latency_ms,
        "created_at": iso(d.created_at), "updated_at": iso(d.updated_at),
    })
}

pub fn webhook_attempt(a: &WebhookAttempt) -> Value {
    json!({
        "n": a.n, "at": iso(a.at), "status": a.status, "error": a.error, "latency_ms": a.latency_ms,
        "excerpt": a.excerpt,
    })
}

pub fn wallet_alert(a: &WalletAlert) -> Value {
    let below = crate::money::MicroUsdc(u64::try_from(a.below).unwrap_or(0));
    json!({
        "network": a.network, "below_micro_usdc": a.below, "below_usdc": below.to_json_number(),
        "low": a.low_since.is_some(), "low_since": a.low_since.map(iso), "checked_at": a.checked_at.map(iso),
    })
}

/// An agent's command listing as `GET .../commands` serves it: the commands offered on
/// `integration` (all, for none).
pub fn command_listing(
    found: &AgentWithCommands,
    integration: Option<crate::domain::Integration>,
    public_base_url: &str,
) -> Value {
    json!({
        "agent_id": found.agent.id,
        "agent_username": found.agent.def.username,
        "mcp_url": format!("{public_base_url}/mcp/{}", found.agent.id),
        "a2a_card_url": format!("{public_base_url}/a2a/{}/.well-known/agent-card.json", found.agent.id),
        "commands": agents::offered(&found.commands, integration).map(command_json).collect::<Vec<_>>(),
    })
}

/// The success envelope around `data`, rendered (no spare room: a body may be kept).
pub fn success_body(data: Value) -> Bytes {
    let mut body = json!({ "success": true, "data": data }).to_string();
    body.shrink_to_fit();
    Bytes::from(body)
}

fn command_json(cmd: &Command) -> Value {
    let def = &cmd.def;
    json!({
        "id": cmd.id,
        "command": def.name,
        "description": def.description,
        "handler_type": def.handler_type.as_str(),
        "parameters": def.parameters,
        "response_format": def.response_format,
        "parameterSchema": def.parameters.iter().map(parameter_schema).collect::<Vec<_>>(),
        "enabled": def.enabled,
        "integrations": def.integrations,
        "price_usd": def.price.map(|p| p.to_json_number()),
        "long_running": def.long_running,
    })
}

/// One parameter as a JSON-Schema-style entry: `{name, required, schema: {...}}`.
pub fn parameter_schema(param: &ParamSpec) -> Value {
    let mut schema = match param.kind {
        ParamType::File => {
            json!({ "type": "string", "format": "binary", "x-unsupported": "file upload is unsupported" })
        }
        ParamType::Array => json!({ "type": "array", "items": {} }),
        other => json!({ "type": other.as_str() }),
    };
    if !param.description.is_empty() {
        schema["description"] = json!(param.description);
    }
    json!({ "name": param.name, "required": param.required, "schema": schema })
}

/// What an agent paid for the services its commands called, and what it may spend.
pub fn spending(spent: &crate::services::spending::Spending, chains: &Chains) -> Value {
    let policy = spent.policy.as_ref().map(|p| {
        json!({
            "max_per_payment_usdc": p.max_per_payment.to_json_number(),
            "max_per_payment_micro_usdc": p.max_per_payment.0,
            "max_per_day_usdc": p.max_per_day.to_json_number(),
            "max_per_day_micro_usdc": p.max_per_day.0,
            "payees": p.payees, "commands": p.commands,
            "networks": p.networks.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
        })
    });
    let payments: Vec<Value> = spent
        .payments
        .iter()
        .map(|r| {
            let s = &r.spend;
            json!({
                "id": s.id, "command": s.command, "network": s.network.as_str(), "state": r.state.as_str(),
                "x402Version": s.x402_version,
                "amount_usdc": s.amount.to_json_number(), "amount_micro_usdc": s.amount.0,
                "pay_to": s.pay_to, "payer": s.payer, "resource": s.resource,
                "transaction": r.transaction, "error": r.error,
                "explorer_url": explorer_url(chains, s.network.as_str(), r.transaction.as_deref()),
                "created_at": iso(r.created_at), "updated_at": iso(r.updated_at),
            })
        })
        .collect();
    json!({
        "policy": policy,
        "spent_today_usdc": spent.spent_today.to_json_number(),
        "spent_today_micro_usdc": spent.spent_today.0,
        "payments": payments,
    })
}
