//! `POST /x402/solana/{agentId}/payment-transaction`: the Solana payment for a browser
//! wallet to sign (on Base the wallet signs the offer's authorization itself). A page cannot build one (it can reach no Solana node for a recent
//! blockhash), and a Wallet-Standard wallet signs what it is given, showing its owner what
//! the transaction moves. What comes back signed is verified as any payment is: this
//! only saves the page a transaction builder, and grants nothing.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::x402::{Address, find_offer, x402_error};
use crate::chains::solana::parse_address;
use crate::chains::solana_payment::unsigned_payment;
use crate::domain::Network;
use crate::error::{ApiError, ApiJson, ApiPath};
use crate::services::payments::X402Error;
use crate::services::{ServiceError, wallets};
use crate::x402::wire::Version;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Asked {
    /// Who pays: the wallet's Solana address.
    payer: String,
    /// The paid command; none for a message.
    #[serde(default)]
    command: Option<String>,
}

type AgentPath = Result<ApiPath<String>, ApiError>;

pub(super) async fn payment_transaction(
    State(state): State<AppState>,
    path: AgentPath,
    body: Result<ApiJson<Asked>, ApiError>,
) -> Response {
    match built(&state, path, body).await {
        Ok(response) => response,
        Err(response) => response,
    }
}

async fn built(
    state: &AppState,
    path: AgentPath,
    body: Result<ApiJson<Asked>, ApiError>,
) -> Result<Response, Response> {
    let refuse = |err: ApiError| x402_error(err, Version::V2);
    let ApiPath(agent_id) = path.map_err(refuse)?;
    let ApiJson(asked) = body.map_err(refuse)?;
    let address = Address {
        network: Network::Solana.as_str().to_string(),
        agent_id,
        command: None,
    };
    let offer = find_offer(state, &address, Version::V2).await?;
    let price = match &asked.command {
        None => offer.default_price,
        Some(name) => match offer.command(name) {
            Some(command) => offer.price_of(command),
            None => {
                return Err(refuse(
                    ServiceError::from(X402Error::CommandNotOffered(name.clone())).into(),
                ));
            }
        },
    };
    let payer = parse_address(&asked.payer).map_err(|e| refuse(ApiError::validation(format!("payer: {e}"))))?;
    let unavailable = |e| refuse(ServiceError::from(wallets::chain_error(Network::Solana, e)).into());
    let pay_to = parse_address(&offer.pay_to).map_err(|e| refuse(ApiError::validation(e)))?;
    let fee_payer = match &offer.fee_payer {
        Some(other) => parse_address(other).map_err(|e| refuse(ApiError::validation(e)))?,
        None => pay_to,
    };
    if payer == fee_payer {
        return Err(refuse(ApiError::validation("payer: the seller's fee payer cannot pay")));
    }
    let chain = &state.services.chains.solana;
    let (transaction, last_valid) = unsigned_payment(chain, &fee_payer, &payer, &pay_to, price)
        .await
        .map_err(unavailable)?;
    Ok(axum::Json(json!({
        "success": true,
        "transaction": transaction,
        "lastValidBlockHeight": last_valid,
        "amount": price.0.to_string(),
        "payTo": offer.pay_to,
        "feePayer": fee_payer.to_string(),
    }))
    .into_response())
}
