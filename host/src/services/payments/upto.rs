//! x402 `upto` on Base: a message or a command paid for by use. The payer signs a Permit2 witness
//! transfer of up to a maximum; it is checked (locally, then on chain: unused, approved,
//! covered, and simulated) and recorded `verified` at that maximum before any work is done
//! ([`hold`]). The work runs while the payment is held. Then what the work used is charged
//! ([`Held::charge`]): the amount, at most the maximum, is recorded with the signed
//! settlement that takes it before that is sent, and a charge of 0 sends nothing. A hold
//! whose work failed by the agent's fault, or that a crash cut off, charges nothing.
//!
//! The payer's turn is held from the checks to the settlement: its maximum is covered by
//! its balance when checked, and no other payment of the payer's can spend that meanwhile.

use alloy::primitives::U256;

use super::retry::{self, Earlier, MetBy};
use super::settled::{ByUse, Settled};
use super::{
    ELSEWHERE_LOOKBACK_SECS, Offer, Purchase, Reserve, Reserved, Sent, already_used, chain_unavailable, conclude,
    met_again, record_once, refusal, refused, scheme, wait_for_landing,
};
use super::{guard, upto_facilitated};
use crate::chains::base::{PermitAuthorization, UptoPaid, parse_address};
use crate::chains::{ChainError, Landing};
use crate::domain::{Network, Rates, Used};
use crate::money::MicroUsdc;
use crate::services::locks::KeyGuard;
use crate::services::{ServiceError, Services, wallets};
use crate::store::NewPayment;
use crate::x402::wire::{self, Payment, RequirementsV2};
use crate::x402::{gas_sponsoring, payment_identifier, upto};

/// How much longer than the offer's `maxTimeoutSeconds` a payer may let an authorization
/// live (its clock may run ahead of ours).
const LONGEST_EXTRA_LIFE_SECS: u64 = 300;

/// How much shorter than `maxTimeoutSeconds` an authorization may live (its clock may run
/// behind ours): the work runs within what is left, so a payer cannot give it too little
/// time to finish and have it released, for nothing, at the agent's cost.
const SHORTEST_LIFE_SLACK_SECS: u64 = 60;

/// What is kept of an authorization's life for its settlement to land, after the work.
const SETTLE_MARGIN_SECS: u64 = 20;

/// Nothing is signed with less than this left before the deadline: it would land too late
/// and fail, at the agent's cost.
const LAST_SIGNING_SECS: u64 = 8;

/// A payment for use held while its work runs, or one made before for the same request.
pub enum Hold {
    Now(Box<Held>),
    Before(Box<Earlier>),
}

/// A recorded `upto` authorization whose work may now run: nothing is charged yet.
pub struct Held {
    payment_id: String,
    agent_id: String,
    pay_to: String,
    payer: String,
    identity: String,
    client: Option<String>,
    rates: Rates,
    auth: PermitAuthorization,
    recorded_secs: u64,
    claim: KeyGuard<String>,
    _payer_turn: KeyGuard<(Network, String)>,
    /// The tokens of the chat's first round, taken from its owner's budget.
    pub prepaid_tokens: u32,
    /// The plugin slot reserved for a command's run.
    pub slot: Option<crate::plugins::SlotPermit>,
    /// Settled through the operator's facilitator: what it is sent (else by the agent's
    /// wallet).
    facilitated: Option<serde_json::Value>,
}

/// An `upto` payment that passed its checks: whose, and on what terms.
struct Checked {
    auth: PermitAuthorization,
    payer: String,
    identity: String,
    rates: Rates,
    /// The requirement it was made for.
    offered: RequirementsV2,
}

/// `base-upto:<payer lowercase>:<nonce>`: a Permit2 authorization is usable once per payer
/// and nonce, whether or not anything was settled under it.
fn identity_of(auth: &PermitAuthorization) -> String {
    format!("base-upto:{}:{}", auth.from.to_string().to_lowercase(), auth.nonce)
}

fn now_secs() -> u64 {
    crate::clock::now_ms() as u64 / 1000
}

/// Checks `payment` (an x402 v2 `upto` payment for the message or command priced by use
/// that `purchase` names) on what it says and who signed it; nothing on chain but a
/// smart wallet's own check of its signature.
async fn check(
    services: &Services,
    offer: &Offer,
    payment: &Payment,
    purchase: &Purchase<'_>,
) -> Result<Checked, ServiceError> {
    let not_offered = || refused("unsupported_scheme", "'upto' is not offered for this request");
    let command = match purchase.command {
        Some(name) => Some(offer.command(name).ok_or_else(not_offered)?),
        None => None,
    };
    let rates = offer.rates_by_use(command).ok_or_else(not_offered)?;
    let offered = offer.requirement_upto(services, command).ok_or_else(not_offered)?;
    let accepted = payment.accepted.as_ref().ok_or_else(not_offered)?;
    accepted.must_match(&offered).map_err(refusal)?;
    wire::echoes_offered_extensions(&payment.extensions, purchase.extensions).map_err(refusal)?;

    let base = &services.chains.base;
    let pay_to = parse_address(&offer.pay_to).map_err(|e| refused("invalid_payment", e))?;
    // Who may settle it: the agent's wallet, or the operator's facilitator (as offered).
    let settler = offer.upto_settler.as_deref().ok_or_else(not_offered)?;
    let settler = parse_address(settler).map_err(|e| refused("invalid_payment", e))?;
    let mut auth = upto::decode(&payment.payload).map_err(refusal)?;
    let now = now_secs();
    let expected = upto::Expected {
        pay_to,
        max: rates.max(),
        usdc: base.usdc(),
        chain_id: base.chain_id(),
        facilitator: settler,
        earliest_deadline: now + super::offer::UPTO_MAX_TIMEOUT_SECONDS - SHORTEST_LIFE_SLACK_SECS,
        latest_deadline: now + super::offer::UPTO_MAX_TIMEOUT_SECONDS + LONGEST_EXTRA_LIFE_SECS,
    };
    if upto::verify(&auth, &expected, now).map_err(refusal)? == upto::SignedBy::Wallet {
        auth.signature = auth.signature.clone().for_wallet();
        authenticate(services, &auth).await?;
    }
    // A payer that has not approved Permit2 may send its permit for it (gas sponsoring).
    let approval_for = gas_sponsoring::Expected {
        from: auth.from,
        usdc: base.usdc(),
        max: auth.max,
        deadline: auth.deadline,
    };
    auth.approval = gas_sponsoring::read(&payment.extensions, &approval_for).map_err(refusal)?;
    let payer = auth.from.to_checksum(None);
    let identity = identity_of(&auth);
    Ok(Checked {
        auth,
        payer,
        identity,
        rates,
        offered,
    })
}

/// Who pays with `payment` and whether it is a retry, for a paid command's breaker: it is
/// checked as [`hold`] checks it first; nothing is recorded.
pub async fn identify(
    services: &Services,
    offer: &Offer,
    payment: &Payment,
    purchase: &Purchase<'_>,
) -> Result<super::identify::Known, ServiceError> {
    let checked = check(services, offer, payment, purchase).await?;
    super::identify::known(services, payment, checked.payer, &checked.identity).await
}

/// Checks `payment` (an x402 v2 `upto` payment for the message or command priced by use
/// that `purchase` names), and records it held at its maximum with the payer's turn taken,
/// after `reserve` took what the work needs. Nothing is signed or sent.
pub async fn hold(
    services: &Services,
    offer: &Offer,
    payment: &Payment,
    purchase: Purchase<'_>,
    reserve: Reserve<'_>,
) -> Result<Hold, ServiceError> {
    let Checked {
        mut auth,
        payer,
        identity,
        rates,
        offered,
    } = check(services, offer, payment, &purchase).await?;
    let network = Network::Base;
    let facilitator = services.facilitators.of(network);
    let base = &services.chains.base;
    let payment_ref = payment_identifier::read(&payment.extensions).map_err(refusal)?;
    if let Some(reference) = &payment_ref
        && let Some(earlier) = services.store.earlier_payment_by_ref(&payer, reference).await?
        && let Some(earlier) =
            retry::recognise(services, earlier, &offer.agent.id, &purchase, MetBy::PaymentRef).await?
    {
        return Ok(Hold::Before(Box::new(earlier)));
    }
    guard::within_payer_limit(services, network, &payer).await?;
    // The same signed payment again is told what it bought (waiting for the answer while
    // it is written), before and again with the payer's turn (recorded while this waited).
    let met_before = async || -> Result<Option<Hold>, ServiceError> {
        let Some(earlier) = services.store.earlier_payment_by_identity(&identity).await? else {
            return Ok(None);
        };
        let earlier = retry::recognise(services, earlier, &offer.agent.id, &purchase, MetBy::Identity).await?;
        earlier
            .map(|e| Some(Hold::Before(Box::new(e))))
            .ok_or_else(already_used)
    };
    if let Some(before) = met_before().await? {
        return Ok(before);
    }
    guard::not_cooling_off(services, network, &payer).await?;
    let payer_turn = guard::payer_turn(services, network, &payer).await?;
    if let Some(before) = met_before().await? {
        return Ok(before);
    }
    // Again with the turn: the payer's payment before this one may have just cost the agent.
    guard::not_cooling_off(services, network, &payer).await?;
    check_on_chain(services, &mut auth, rates.max()).await?;
    let facilitated = match facilitator {
        // The facilitator verifies it too, and simulates settling the maximum from its own
        // address: what it would refuse after the work is refused before it.
        Some(facilitator) => {
            // Its settlement of the maximum simulated as the facilitator would send it (a
            // payer's permit for Permit2 included), whatever its own checks simulate.
            let settler = offered.extra["facilitatorAddress"].as_str().unwrap_or_default();
            let settler = parse_address(settler).map_err(|e| refused("invalid_payment", e))?;
            match base
                .simulate_upto_settlement(settler, &auth, U256::from(rates.max().0))
                .await
            {
                Ok(()) => {}
                Err(ChainError::Refused(reason)) => {
                    return Err(refused(
                        "settlement_failed",
                        format!("The payment could not be settled: {reason}"),
                    ));
                }
                Err(other) => return Err(chain_unavailable(network, other)),
            }
            let request = upto_facilitated::request(services, offer, payment, &offered, auth.approval.is_some());
            super::facilitated::verify(facilitator, &request).await?;
            Some(request)
        }
        // The settlement of the whole maximum, signed now as it would be after the work and
        // thrown away: what the agent's wallet cannot settle (no ETH for gas, fees over
        // their caps) is refused before the work, not after it.
        None => {
            let wallet = wallets::wallet(services, &offer.agent.id, network).await?;
            let key = wallets::open_key(services, &wallet)?;
            match base.sign_upto_settlement(&key, &auth, U256::from(rates.max().0)).await {
                Ok(_) => None,
                Err(ChainError::Refused(reason)) => {
                    return Err(refused(
                        "settlement_failed",
                        format!("The payment could not be settled: {reason}"),
                    ));
                }
                Err(other) => return Err(chain_unavailable(network, other)),
            }
        }
    };
    let (prepaid_tokens, slot) = match reserve.await? {
        Reserved::ChatTokens(tokens) => (tokens, None),
        Reserved::Slot(slot) => (0, Some(slot)),
    };
    let payment_id = format!("pay_{}", crate::random::hex_token(12));
    let claim = services.payment_locks.claims.lock(payment_id.clone()).await?;
    let record = NewPayment {
        id: payment_id.clone(),
        identity: identity.clone(),
        agent_id: offer.agent.id.clone(),
        network,
        payer: payer.clone(),
        pay_to: offer.pay_to.clone(),
        amount: rates.max(),
        command: purchase.command.map(str::to_string),
        request: purchase.request.to_string(),
        transaction: None,
        raw_tx: None,
        valid_until: u64::try_from(auth.deadline).ok(),
        x402_version: payment.version.number(),
        payment_ref,
        facilitator: facilitator.map(|f| f.label().to_string()),
        transfer_log_index: None,
        upto: true,
    };
    if !record_once(services, &record).await? {
        drop((claim, payer_turn));
        return met_again(services, &record, &purchase)
            .await
            .map(|e| Hold::Before(Box::new(e)));
    }
    Ok(Hold::Now(Box::new(Held {
        payment_id,
        agent_id: offer.agent.id.clone(),
        pay_to: offer.pay_to.clone(),
        payer,
        identity,
        client: purchase.client.map(str::to_string),
        rates,
        auth,
        recorded_secs: now_secs(),
        claim,
        _payer_turn: payer_turn,
        prepaid_tokens,
        slot,
        facilitated,
    })))
}

/// A signature that does not recover to the payer is its deployed wallet's to accept.
async fn authenticate(services: &Services, auth: &PermitAuthorization) -> Result<(), ServiceError> {
    let base = &services.chains.base;
    let digest = auth.signing_hash(base.chain_id());
    let verdict = base
        .wallet_accepts(auth.from, digest, &auth.signature)
        .await
        .map_err(|e| chain_unavailable(Network::Base, e))?;
    match verdict {
        crate::chains::base::WalletVerdict::Accepts => Ok(()),
        crate::chains::base::WalletVerdict::Refuses => Err(refused(
            "invalid_signature",
            format!(
                "the signature is not the payer's for this Permit2 authorization and chain: it does not recover to {} \
                 and no wallet there accepts it (ERC-1271)",
                auth.from
            ),
        )),
        crate::chains::base::WalletVerdict::OverGasCap(cap) => Err(refused(
            "invalid_payment",
            format!("the payer's wallet needs more than {cap} gas (base_max_gas) to check its signature"),
        )),
    }
}

/// What the chain must say before any work: the nonce unused, Permit2 approved for the
/// maximum (or the payer's permit for it sent along, kept only while it is needed), the
/// balance covering it. (Then the settlement of the whole maximum is simulated.)
async fn check_on_chain(
    services: &Services,
    auth: &mut PermitAuthorization,
    max: MicroUsdc,
) -> Result<(), ServiceError> {
    let base = &services.chains.base;
    let unavailable = |e| chain_unavailable(Network::Base, e);
    if base
        .permit2_nonce_used(auth.from, auth.nonce)
        .await
        .map_err(unavailable)?
    {
        return Err(already_used());
    }
    let allowance = base.permit2_allowance(auth.from).await.map_err(unavailable)?;
    if allowance >= U256::from(max.0) {
        // Approved already: its permit would only replace the payer's own approval.
        auth.approval = None;
    } else if auth.approval.is_none() {
        return Err(refused(
            "permit2_allowance_required",
            format!(
                "the payer has not approved Permit2 ({}) to move its USDC: approve it once (an ERC-20 approve \
                 from the payer's wallet), then pay again",
                crate::chains::base::PERMIT2
            ),
        ));
    }
    let balance = base.usdc_of(auth.from).await.map_err(unavailable)?;
    super::covers(balance, max)
}

impl Held {
    pub fn payment_id(&self) -> &str {
        &self.payment_id
    }

    /// Who signed the authorization.
    pub fn payer(&self) -> &str {
        &self.payer
    }

    /// How long the work may still run, leaving the settlement time to land before the
    /// authorization's deadline.
    pub fn time_left(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.deadline().saturating_sub(now_secs() + SETTLE_MARGIN_SECS))
    }

    /// Charges what the work used (at most the maximum) and settles it: recorded with its
    /// signed settlement before that is sent, and nothing sent for a charge of 0. `Err`: the
    /// settlement failed (the payer's funds or approval went meanwhile) and nothing was taken.
    pub async fn charge(self, services: &Services, used: Used) -> Result<Settled, ServiceError> {
        let charge = self.rates.charge(&used);
        let store = &services.store;
        // Nothing to settle: metered, it is served from `verified` (a crash first leaves it
        // failed, nothing taken, never refunded).
        if charge == MicroUsdc::ZERO {
            if !store.meter_payment(&self.payment_id, used, charge, None).await? {
                return Err(self.no_longer_held());
            }
            return Ok(self.settled(used, charge, String::new()));
        }
        if self.facilitated.is_some() {
            return self.charge_through_facilitator(services, used, charge).await;
        }
        let network = Network::Base;
        let unavailable = |e| chain_unavailable(network, e);
        let wallet = wallets::wallet(services, &self.agent_id, network).await?;
        let key = wallets::open_key(services, &wallet)?;
        let too_late = || -> Result<Settled, ServiceError> {
            Err(refused(
                "settlement_failed",
                "The payment could not be settled before its authorization's deadline; nothing was taken",
            ))
        };
        let signing_window = self.deadline().saturating_sub(now_secs() + LAST_SIGNING_SECS);
        let Some(wallet_turn) = services
            .wallet_locks
            .lock_within(
                (self.agent_id.clone(), network),
                std::time::Duration::from_secs(signing_window),
            )
            .await?
        else {
            self.release_quietly(services, used, "the agent's wallet was busy until the deadline", false)
                .await;
            return too_late();
        };
        if self.deadline() < now_secs() + LAST_SIGNING_SECS {
            self.release_quietly(services, used, "the work ended too close to the deadline", false)
                .await;
            return too_late();
        }
        let signed = match services
            .chains
            .base
            .sign_upto_settlement(&key, &self.auth, U256::from(charge.0))
            .await
        {
            Ok(signed) => signed,
            // The payer revoked the approval, moved its funds or used the nonce while the work
            // ran: the work cost the agent, so it counts against the payer as a settlement
            // that failed on chain does (cool-off, weight).
            Err(ChainError::Refused(reason)) => {
                store.meter_payment(&self.payment_id, used, charge, None).await?;
                let why = format!("the payment could not be settled: {reason}");
                store.fail_payment(&self.payment_id, &why, true).await?;
                guard::charge_failed_settlement(services, network, &self.payer, self.client.as_deref()).await;
                return Err(refused("settlement_failed", why));
            }
            Err(other) => return Err(unavailable(other)),
        };
        drop(key);
        if !store
            .meter_payment(&self.payment_id, used, charge, Some(&signed))
            .await?
        {
            return Err(self.no_longer_held());
        }
        crate::faults::crash_point("x402:upto_after_meter");
        let chain = services.chains.get(network);
        let submitted = chain.submit(&signed).await;
        drop(wallet_turn);
        let landing = match submitted {
            Err(ChainError::Refused(reason)) => Landing::Dropped(reason),
            _ => wait_for_landing(services, chain, &signed).await?,
        };
        let sent = Sent {
            payment_id: &self.payment_id,
            agent_id: &self.agent_id,
            network,
            payer: &self.payer,
            client: self.client.as_deref(),
            identity: &self.identity,
            terms: scheme::Terms {
                pay_to: self.pay_to.clone(),
                price: charge,
                fee_payer: None,
            },
            since_secs: self.recorded_secs.saturating_sub(ELSEWHERE_LOOKBACK_SECS),
            agent_pays_fee: true,
            tx: signed,
        };
        let transaction = conclude(services, scheme::of(network), &sent, landing).await?;
        Ok(self.settled(used, charge, transaction))
    }

    /// [`Held::charge`] of a charge above 0, settled by the operator's facilitator: recorded,
    /// then asked of it and found on chain. `Err`: not shown on chain (yet): the answer is
    /// withheld; recovery finds the settlement (then refunds it) or fails the payment.
    async fn charge_through_facilitator(
        self,
        services: &Services,
        used: Used,
        charge: MicroUsdc,
    ) -> Result<Settled, ServiceError> {
        let network = Network::Base;
        let (Some(facilitator), Some(request)) = (services.facilitators.of(network), &self.facilitated) else {
            self.release_quietly(services, used, "the facilitator is no longer configured", false)
                .await;
            return Err(refused(
                "settlement_failed",
                "The payment's facilitator is no longer configured; nothing was taken",
            ));
        };
        if self.deadline() < now_secs() + LAST_SIGNING_SECS {
            self.release_quietly(services, used, "the work ended too close to the deadline", false)
                .await;
            return Err(refused(
                "settlement_failed",
                "The payment could not be settled before its authorization's deadline; nothing was taken",
            ));
        }
        let store = &services.store;
        if !store.meter_payment(&self.payment_id, used, charge, None).await? {
            return Err(self.no_longer_held());
        }
        crate::faults::crash_point("x402:upto_after_meter");
        let paid = UptoPaid {
            from: self.auth.from,
            nonce: self.auth.nonce,
            to: parse_address(&self.pay_to).map_err(|e| refused("invalid_payment", e))?,
            value: U256::from(charge.0),
        };
        // Nothing sent before this payment was recorded can be its settlement.
        let since = self.recorded_secs.saturating_sub(60);
        let approval = self.auth.approval.as_ref();
        let transaction =
            upto_facilitated::settle(services, facilitator, request, &self.payment_id, &paid, approval, since).await?;
        Ok(self.settled(used, charge, transaction))
    }

    /// The work failed by the agent's fault: nothing is charged, and the authorization is
    /// never settled. What the failed work used is recorded all the same, and the payer
    /// cools off as after a refund: failing work is not to be had again and again for free.
    pub async fn release(self, services: &Services, used: Used, why: &str) -> Settled {
        self.release_quietly(services, used, why, true).await;
        self.settled(used, MicroUsdc::ZERO, String::new())
    }

    /// Fails the hold, charging nothing; `cools_off`: its payer cools off as after a refund.
    async fn release_quietly(&self, services: &Services, used: Used, why: &str, cools_off: bool) {
        let store = &services.store;
        let released = async {
            store
                .meter_payment(&self.payment_id, used, MicroUsdc::ZERO, None)
                .await?;
            store
                .release_payment(&self.payment_id, &format!("nothing charged: {why}"), cools_off)
                .await
        };
        if let Err(err) = released.await {
            // Left `verified` with nothing signed: recovery fails it, and nothing is taken.
            tracing::warn!(payment = self.payment_id, "could not record a hold released: {err}");
        }
    }

    fn deadline(&self) -> u64 {
        u64::try_from(self.auth.deadline).unwrap_or(u64::MAX)
    }

    fn no_longer_held(&self) -> ServiceError {
        ServiceError::Conflict(format!("payment {} is no longer held", self.payment_id))
    }

    fn settled(self, used: Used, charge: MicroUsdc, transaction: String) -> Settled {
        Settled {
            payment_id: self.payment_id,
            agent_id: self.agent_id,
            network: Network::Base,
            payer: self.payer,
            pay_to: self.pay_to,
            amount: charge,
            transaction,
            settled_at: crate::clock::now_ms(),
            _claim: Some(self.claim),
            slot: None,
            prepaid_tokens: self.prepaid_tokens,
            by_use: Some(ByUse {
                max: self.rates.max(),
                used,
                command: matches!(self.rates, Rates::Units(_)),
            }),
        }
    }
}
