//! The guarded outbound HTTP clients, from the operator's settings: one per kind of caller,
//! each with its own private exceptions, all trusting the same extra CA certificates.

use std::time::Duration;

use anyhow::Context;

use crate::config::Settings;
use crate::marker::MarkerKey;
use crate::outbound::{HostPattern, Outbound, OutboundPolicy};
use crate::secrets::MasterKey;

/// The three guards: plugins', webhooks' (their own private exceptions, so an internal API
/// opened to plugins is not opened to every account's webhook endpoints) and the one that
/// fetches OAuth clients' metadata documents.
pub struct Guards {
    pub plugins: Outbound,
    pub webhooks: Outbound,
    pub client_documents: Outbound,
}

pub fn guards(settings: &Settings, master: &MasterKey) -> anyhow::Result<Guards> {
    let roots = extra_roots(settings)?;
    let guard = |private: &[String], setting: &str| guard(settings, master, &roots, private, setting);
    Ok(Guards {
        plugins: guard(&settings.outbound.outbound_allow_private, "outbound_allow_private")?,
        webhooks: guard(&settings.webhooks.webhook_allow_private, "webhook_allow_private")?,
        client_documents: guard(&settings.mcp.mcp_oauth_allow_private, "mcp_oauth_allow_private")?,
    })
}

/// `outbound_ca_file`'s certificates, read once; none when it is unset.
fn extra_roots(settings: &Settings) -> anyhow::Result<Vec<reqwest::Certificate>> {
    let Some(file) = &settings.outbound.outbound_ca_file else {
        return Ok(Vec::new());
    };
    let pem = std::fs::read(file).with_context(|| format!("outbound_ca_file {}", file.display()))?;
    reqwest::Certificate::from_pem_bundle(&pem)
        .with_context(|| format!("outbound_ca_file {}: not PEM certificates", file.display()))
}

fn guard(
    settings: &Settings,
    master: &MasterKey,
    roots: &[reqwest::Certificate],
    private: &[String],
    setting: &str,
) -> anyhow::Result<Outbound> {
    let patterns = |list: &[String], what: &str| -> anyhow::Result<Vec<HostPattern>> {
        list.iter()
            .map(|h| HostPattern::parse(h).ok_or_else(|| anyhow::anyhow!("{what}: '{h}' is not a host or host:port")))
            .collect()
    };
    let (own_addresses, own_names) = crate::outbound::own_addresses(settings.server.public_base_url.as_deref());
    let policy = OutboundPolicy {
        allowed_hosts: patterns(&settings.outbound.outbound_allowed_hosts, "outbound_allowed_hosts")?,
        private_exceptions: patterns(private, setting)?,
        allowed_ports: settings.outbound.outbound_allowed_ports.clone(),
        own_addresses,
        own_names,
        max_response_bytes: settings.outbound.outbound_max_response_bytes,
        max_timeout: Duration::from_millis(settings.outbound.outbound_timeout_ms),
        max_redirects: 5,
        marker: Some(MarkerKey::derive(master.bytes())),
    };
    Ok(Outbound::trusting(policy, roots)?)
}
