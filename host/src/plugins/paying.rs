//! Paying for what a plugin asks of a paid service. A request of a run whose command the
//! agent's owner lets pay (`Grants::pays`), through `http` or `wasi:http`, that is answered
//! with an x402 `402` is shown to the host's [`Payer`]: when the owner's limits allow that
//! payee that much, the payer signs a payment
//! from the agent's wallet and the request is sent once more, with it. The plugin sees the
//! answer to that retry (or a refusal that says why), never the key or the payment.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::outbound::{HostPattern, Outbound, OutboundError, OutboundRequest, OutboundResponse};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The run a request was made for: who would pay.
#[derive(Debug, Clone)]
pub struct PayingRun {
    pub account_id: String,
    pub agent_id: String,
    /// The command whose request it was (for a remote MCP tool, the chat's name of it).
    pub command: String,
    /// The remote MCP server whose tool it was, if it was one (`services/remote_tools.rs`).
    pub mcp_server: Option<String>,
}

/// What the host does about a `402`.
#[derive(Debug, Clone, PartialEq)]
pub enum PayDecision {
    /// Not the host's to pay (no x402 offer, or the agent does not pay for this command):
    /// the run gets the 402 as it came.
    PassOn,
    /// The owner's limits do not allow it: the run's request fails with this reason, and
    /// nothing is paid.
    Refused(String),
    /// Sent again with this header (name, value); `paid` is told how that went.
    Pay {
        payment_id: String,
        header: (String, String),
    },
}

/// Pays x402 answers from the agent's wallet, within what its owner allows.
pub trait Payer: Send + Sync {
    /// `answer` is a 402 to `request`, made by `run`.
    fn pay<'a>(
        &'a self,
        run: &'a PayingRun,
        request: &'a OutboundRequest,
        answer: &'a OutboundResponse,
    ) -> BoxFuture<'a, PayDecision>;

    /// How the request sent with payment `payment_id` was answered.
    fn paid<'a>(
        &'a self,
        payment_id: &'a str,
        answer: Result<&'a OutboundResponse, &'a OutboundError>,
    ) -> BoxFuture<'a, ()>;
}

/// The headers a payment travels in, x402's two versions: the host sets its own, and a
/// plugin's are not sent with it.
const PAYMENT_HEADERS: [&str; 2] = ["x-payment", "payment-signature"];

/// Sends `request` through the guard; a `402` is shown to `payer` (when there is one) and,
/// if it pays, the request is sent again once with the payment. A second 402 is the
/// answer: the payee refused it, and nothing is paid twice.
///
/// What is paid for is the request that was answered `402`: after redirects, the last one
/// (its address is what the payee list is checked against). The paid request goes there
/// alone, following no redirect, so the payment reaches no other host. It runs to its end
/// and its outcome is recorded even when the run is cut off meanwhile.
pub async fn send_paying(
    outbound: &Outbound,
    allowed: &[HostPattern],
    payer: Option<(Arc<dyn Payer>, PayingRun)>,
    request: OutboundRequest,
) -> Result<OutboundResponse, OutboundError> {
    let Some((payer, run)) = payer else {
        return outbound.send(request, allowed).await;
    };
    let mut again = request.clone();
    let answer = outbound.send(request, allowed).await?;
    if answer.status != 402 {
        return Ok(answer);
    }
    if answer.method != again.method.to_ascii_uppercase() {
        // A redirect made it a GET: what was answered had no body.
        again.body = None;
    }
    again.method = answer.method.clone();
    again.url = answer.url.clone();
    again.follow_redirects = false;
    match payer.pay(&run, &again, &answer).await {
        PayDecision::PassOn => Ok(answer),
        PayDecision::Refused(reason) => Err(OutboundError::Denied(reason)),
        PayDecision::Pay { payment_id, header } => {
            if let Some(budget) = &again.budget {
                budget.give_back(answer.body.len());
            }
            drop(answer);
            again
                .headers
                .retain(|(name, _)| !PAYMENT_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)));
            again.headers.push(header);
            let (outbound, allowed) = (outbound.clone(), allowed.to_vec());
            let paid = tokio::spawn(async move {
                let result = outbound.send(again, &allowed).await;
                payer.paid(&payment_id, result.as_ref()).await;
                result
            });
            paid.await
                .unwrap_or_else(|e| Err(OutboundError::Transport(format!("the paid request failed: {e}"))))
        }
    }
}
