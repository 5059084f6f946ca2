//! Low-balance alerts: an owner names, per wallet, the USDC balance below which they want a
//! `wallet.low_balance` webhook. Wallets with an alert are read every `wallet_check_secs`
//! (by one host at a time) and when the alert is set; the event is written once when the
//! balance goes below, and again only after it came back above.

use serde_json::json;
use tokio::sync::watch;

use super::{ServiceError, Services, wallets};
use crate::domain::Network;
use crate::money::MicroUsdc;
use crate::store::WalletAlert;

/// Sets (or with `None`, removes) the alert on the agent's wallet, and checks it now.
pub async fn set(
    services: &Services,
    agent_id: &str,
    network: Network,
    below: Option<MicroUsdc>,
) -> Result<Option<WalletAlert>, ServiceError> {
    wallets::wallet(services, agent_id, network).await?;
    let below = below.map(|b| i64::try_from(b.0).unwrap_or(i64::MAX));
    services
        .store
        .set_wallet_alert(agent_id, network.as_str(), below)
        .await?;
    let alert = services
        .store
        .wallet_alerts(Some(agent_id))
        .await?
        .into_iter()
        .find(|a| a.network == network.as_str());
    if let Some(alert) = &alert {
        check(services, alert).await;
    }
    Ok(alert)
}

pub async fn of_agent(services: &Services, agent_id: &str) -> Result<Vec<WalletAlert>, ServiceError> {
    Ok(services.store.wallet_alerts(Some(agent_id)).await?)
}

/// Reads the wallet's balance and records what it says; a balance that cannot be read is
/// tried again at the next pass.
async fn check(services: &Services, alert: &WalletAlert) {
    let Some(network) = Network::parse(&alert.network) else {
        return;
    };
    let balance = match wallets::balance(services, &alert.agent_id, network).await {
        Ok(balance) => balance,
        Err(err) => {
            tracing::debug!(agent = %alert.agent_id, error = %err, "could not read a watched wallet");
            return;
        }
    };
    let usdc = i64::try_from(balance.balances.usdc.0).unwrap_or(i64::MAX);
    let data = json!({
        "agent_id": alert.agent_id,
        "network": alert.network,
        "address": balance.wallet.address,
        "balance_micro_usdc": usdc,
        "below_micro_usdc": alert.below,
    });
    if let Err(err) = services.store.note_wallet_check(alert, usdc < alert.below, data).await {
        tracing::warn!(agent = %alert.agent_id, error = %err, "could not record a wallet check");
    }
}

/// Checks every alert every `wallet_check_secs`, one host at a time.
pub async fn check_periodically(services: Services, mut stop: watch::Receiver<bool>) {
    let every = std::time::Duration::from_secs(services.settings.webhooks.wallet_check_secs);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        match services.store.try_turn("wallet-alerts").await {
            Ok(Some(_turn)) => match services.store.wallet_alerts(None).await {
                Ok(alerts) => {
                    for alert in &alerts {
                        if *stop.borrow() {
                            return;
                        }
                        check(&services, alert).await;
                    }
                }
                Err(err) => tracing::warn!(error = %err, "could not read the wallet alerts"),
            },
            Ok(None) => {}
            Err(err) => tracing::warn!(error = %err, "could not take the wallet-alert turn"),
        }
    }
}
