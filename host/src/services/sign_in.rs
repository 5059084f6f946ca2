//! Sign-in instead of payment (x402's `sign-in-with-x`): a command whose manifest gives
//! sign-in terms offers a challenge with its 402; a wallet that signs it uses the command
//! without paying, under the pass its last payment bought or the free allowance. The
//! challenge is checked here (the wire and the signature in `x402::sign_in`, a contract
//! wallet's signature on chain, last), the allowance in the store, in one write.

use serde_json::Value;

use super::payments::X402Error;
use super::{ServiceError, Services};
use crate::chains::base::WalletVerdict;
use crate::domain::{Agent, Command, Network, SignInTerms};
use crate::store::{SignInGrant, SignInRefusal, SignInUse};
use crate::x402::PaymentError;
use crate::x402::sign_in::{self, Chain, Place, SignIn};

/// Where a sign-in is asked: the address (or MCP endpoint) and the resource it is for.
#[derive(Debug, Clone)]
pub struct Asked<'a> {
    pub agent: &'a Agent,
    pub command: &'a Command,
    pub uri: &'a str,
    pub resource: &'a str,
}

/// A wallet let in to use a command without paying.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub network: Network,
    pub wallet: String,
    pub nonce: String,
    pub grant: SignInGrant,
}

/// The challenge a 402 for `asked` offers, if its command takes sign-ins and a chain the
/// agent sells on can name itself.
pub async fn challenge(services: &Services, asked: &Asked<'_>) -> Option<Value> {
    asked.command.def.sign_in?;
    let chains = chains(services, asked.agent).await;
    if chains.is_empty() {
        return None;
    }
    let domain = domain(services);
    let place = place(&domain, asked);
    Some(sign_in::challenge(
        &services.sign_in_nonces,
        &place,
        &chains,
        crate::clock::now_ms(),
    ))
}

/// A sign-in whose challenge, signature and nonce passed: not let in yet.
#[derive(Debug)]
pub struct Verified {
    checked: sign_in::Checked,
    terms: SignInTerms,
}

impl Verified {
    pub fn network(&self) -> Network {
        self.checked.network
    }

    pub fn wallet(&self) -> &str {
        &self.checked.wallet
    }
}

/// Checks `presented` for the command asked: its challenge (ours, for this address, in
/// time), its nonce not used yet, and its signature (a contract wallet's asked on chain,
/// last). Refused: `402 sign_in_refused` with the reason. Nothing is recorded.
pub async fn verify(services: &Services, asked: &Asked<'_>, presented: &SignIn) -> Result<Verified, ServiceError> {
    let Some(terms) = asked.command.def.sign_in else {
        return Err(refused(format!(
            "/{} is not given to wallets that sign in: pay for it",
            asked.command.def.name
        )));
    };
    let chains = chains(services, asked.agent).await;
    let domain = domain(services);
    let checked = sign_in::check(
        &services.sign_in_nonces,
        presented,
        &place(&domain, asked),
        &chains,
        crate::clock::now_ms(),
    )
    .map_err(refused)?;
    if services.store.sign_in_nonce_used(&checked.nonce).await? {
        return Err(nonce_used());
    }
    if let Some(ask) = &checked.ask_wallet {
        let verdict = services
            .chains
            .base
            .wallet_accepts(ask.wallet, ask.digest, &ask.signature)
            .await
            .map_err(|e| super::payments::chain_unavailable(Network::Base, e))?;
        if verdict != WalletVerdict::Accepts {
            return Err(refused(format!(
                "the signature is not {}'s: it does not recover to it and no wallet there accepts it (ERC-1271)",
                checked.wallet
            )));
        }
    }
    Ok(Verified { checked, terms })
}

/// Lets a verified sign-in in under the command's terms, recording it (and so its nonce);
/// or refuses it when the wallet has nothing left, recording nothing.
pub async fn let_in(services: &Services, asked: &Asked<'_>, verified: Verified) -> Result<SignedIn, ServiceError> {
    let Verified { checked, terms } = verified;
    let admitted = services
        .store
        .admit_sign_in(
            SignInUse {
                nonce: checked.nonce.clone(),
                agent_id: asked.agent.id.clone(),
                command: asked.command.def.name.clone(),
                network: checked.network,
                wallet: checked.wallet.clone(),
                now: crate::clock::now_ms(),
            },
            terms,
        )
        .await?;
    match admitted {
        Ok(grant) => Ok(SignedIn {
            network: checked.network,
            wallet: checked.wallet,
            nonce: checked.nonce,
            grant,
        }),
        Err(SignInRefusal::NonceUsed) => Err(nonce_used()),
        Err(SignInRefusal::NothingLeft {
            paid,
            free_again_at,
            all_free_used,
        }) => {
            let pass = match (terms.pass, paid) {
                (None, _) => "",
                (Some(_), true) => "the pass its last payment bought is used up or over",
                (Some(_), false) => "it has not paid for this command",
            };
            let free = match (terms.free, free_again_at) {
                (None, _) => String::new(),
                (Some(_), _) if all_free_used => "the free calls of all wallets are used for now".into(),
                (Some(_), Some(at)) => format!("its free calls are used until {}", crate::clock::iso(at)),
                (Some(_), None) => "its free calls are used".into(),
            };
            let why = [pass, &free]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(", and ");
            Err(refused(format!(
                "{} has nothing left to use here: {why}; pay for this call",
                checked.wallet
            )))
        }
    }
}

fn nonce_used() -> ServiceError {
    refused("its nonce was used already: sign the challenge of a new 402".into())
}

/// The call a sign-in was let in for failed by the agent's fault: it is given back.
pub async fn give_back(services: &Services, signed_in: &SignedIn) {
    if let Err(err) = services.store.release_sign_in(&signed_in.nonce).await {
        tracing::warn!(wallet = %signed_in.wallet, error = %err, "a sign-in's call could not be given back");
    }
}

fn refused(reason: String) -> ServiceError {
    X402Error::Refused(PaymentError::new(
        "sign_in_refused",
        format!("Sign-in refused: {reason}"),
    ))
    .into()
}

/// The chains the agent sells on that can name themselves (CAIP-2).
async fn chains(services: &Services, agent: &Agent) -> Vec<Chain> {
    let mut chains = Vec::new();
    for &network in &agent.def.x402.networks {
        if let Ok(id) = services.chains.get(network).network_id().await {
            chains.push(Chain { network, id });
        }
    }
    chains
}

/// The public origin's `host[:port]`: what a challenge names as its domain. From the
/// configuration, never from a request's `Host`, which its sender chooses.
fn domain(services: &Services) -> String {
    let url = &services.public_base_url;
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let host = rest.split('/').next().unwrap_or_default().to_ascii_lowercase();
    // As a browser's URL names it: no default port.
    let default_port = if scheme.eq_ignore_ascii_case("http") {
        ":80"
    } else {
        ":443"
    };
    host.strip_suffix(default_port).map(str::to_string).unwrap_or(host)
}

fn place<'a>(domain: &'a str, asked: &Asked<'a>) -> Place<'a> {
    Place {
        domain,
        uri: asked.uri,
        resource: asked.resource,
    }
}
