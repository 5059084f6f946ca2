//! Signed webhooks: the endpoints an account registers, and their deliveries as the owner
//! sees them. Events are written by the store in the writes they report
//! (`store::webhooks`); `dispatch` sends them; `sign` signs them.

pub mod dispatch;
pub mod sign;

use super::{ServiceError, Services};
use crate::domain::Account;
use crate::outbound::{HostPattern, OutboundError};
use crate::store::webhooks::EVENT_TYPES;
use crate::store::{EndpointChange, StoreError, WebhookAttempt, WebhookDelivery, WebhookEndpoint};

/// The associated data an endpoint's secret is sealed under.
pub fn secret_label(endpoint_id: &str) -> String {
    format!("webhook:{endpoint_id}")
}

/// Longest URL and description an endpoint may have.
const MAX_URL_CHARS: usize = 2048;
const MAX_DESCRIPTION_CHARS: usize = 200;

/// What an owner registers.
pub struct NewEndpoint {
    pub url: String,
    pub description: Option<String>,
    pub events: Vec<String>,
}

/// Event types as given: each one known, `*` for all of them, at least one.
pub fn parse_events(given: &[String]) -> Result<Vec<String>, ServiceError> {
    if given.iter().any(|e| e == "*") {
        return Ok(EVENT_TYPES.iter().map(|e| e.to_string()).collect());
    }
    let mut events: Vec<String> = Vec::new();
    for event in given {
        if !EVENT_TYPES.contains(&event.as_str()) {
            return Err(ServiceError::Validation(format!(
                "Invalid field 'events': unknown event '{event}'; use {} or *",
                EVENT_TYPES.join(", ")
            )));
        }
        if !events.contains(event) {
            events.push(event.clone());
        }
    }
    if events.is_empty() {
        return Err(ServiceError::Validation(
            "Invalid field 'events': name at least one event, or *".into(),
        ));
    }
    Ok(events)
}

pub fn parse_description(text: Option<&str>) -> Result<Option<String>, ServiceError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if text.chars().count() > MAX_DESCRIPTION_CHARS || text.chars().any(char::is_control) {
        return Err(ServiceError::Validation(format!(
            "Invalid field 'description': at most {MAX_DESCRIPTION_CHARS} characters, no control characters"
        )));
    }
    Ok(Some(text.to_string()))
}

/// An endpoint's URL, refused now if the outbound guard would refuse it when sending (a
/// private address the operator did not allow, a port, a scheme).
pub async fn checked_url(services: &Services, url: &str) -> Result<String, ServiceError> {
    let url = url.trim();
    let invalid = |why: String| ServiceError::Validation(format!("Invalid field 'url': {why}"));
    if url.len() > MAX_URL_CHARS {
        return Err(invalid(format!("at most {MAX_URL_CHARS} characters")));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(format!("not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("use an http or https URL".into()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid(
            "no credentials in the URL; the signature proves who sends".into(),
        ));
    }
    // Webhooks go wherever the owner said, within the operator's rules.
    match services.webhook_outbound.vet(url, &[HostPattern::anywhere()]).await {
        Ok(()) => Ok(parsed.to_string()),
        Err(OutboundError::Denied(why)) => Err(invalid(format!("this server may not call it: {why}"))),
        Err(other) => Err(invalid(other.to_string())),
    }
}

/// Registers an endpoint; it and its secret (`whsec_...`), shown to the owner.
pub async fn create(
    services: &Services,
    account: &Account,
    new: NewEndpoint,
) -> Result<(WebhookEndpoint, String), ServiceError> {
    let limit = services.settings.webhooks.webhook_max_endpoints;
    // Asked first to spare the URL's check; the insert counts again, in its own write.
    if services.store.count_webhook_endpoints(&account.id).await? >= limit {
        return Err(ServiceError::QuotaExceeded(format!(
            "An account may register {limit} webhook endpoints; delete one first"
        )));
    }
    let url = checked_url(services, &new.url).await?;
    let id = format!("whe_{}", crate::random::hex_token(8));
    let mut secret = vec![0u8; sign::SECRET_BYTES];
    crate::random::fill(&mut secret);
    let endpoint = WebhookEndpoint {
        id: id.clone(),
        account_id: account.id.clone(),
        url,
        description: new.description,
        events: new.events,
        secret: services.secrets.seal(&secret_label(&id), &secret),
        created_at: crate::clock::now_ms(),
        disabled_at: None,
        disabled_reason: None,
        failing_since: None,
        consecutive_failures: 0,
        last_success_at: None,
    };
    services
        .store
        .insert_webhook_endpoint(endpoint.clone(), limit, services.sealing_key_check())
        .await?;
    Ok((endpoint, sign::show_secret(&secret)))
}

pub async fn list(services: &Services, account: &Account) -> Result<Vec<WebhookEndpoint>, ServiceError> {
    Ok(services.store.webhook_endpoints(&account.id).await?)
}

fn unknown(id: &str) -> ServiceError {
    ServiceError::NotFound(format!("no webhook endpoint with id {id}"))
}

/// The account's endpoint with its secret as the owner copies it.
pub async fn show(services: &Services, account: &Account, id: &str) -> Result<(WebhookEndpoint, String), ServiceError> {
    let endpoint = services
        .store
        .webhook_endpoint(&account.id, id)
        .await?
        .ok_or_else(|| unknown(id))?;
    let secret = open_secret(services, &endpoint)?;
    Ok((endpoint, sign::show_secret(&secret)))
}

pub(super) fn open_secret(services: &Services, endpoint: &WebhookEndpoint) -> Result<Vec<u8>, ServiceError> {
    services
        .secrets
        .open(&secret_label(&endpoint.id), &endpoint.secret)
        .map_err(|_| ServiceError::Execution(format!("the secret of webhook endpoint {} does not open", endpoint.id)))
}

pub async fn update(
    services: &Services,
    account: &Account,
    id: &str,
    mut change: EndpointChange,
) -> Result<WebhookEndpoint, ServiceError> {
    if let Some(url) = &change.url {
        change.url = Some(checked_url(services, url).await?);
    }
    services
        .store
        .update_webhook_endpoint(&account.id, id, change)
        .await?
        .ok_or_else(|| unknown(id))
}

pub async fn delete(services: &Services, account: &Account, id: &str) -> Result<(), ServiceError> {
    match services.store.delete_webhook_endpoint(&account.id, id).await? {
        true => Ok(()),
        false => Err(unknown(id)),
    }
}

/// The endpoint's deliveries, newest first.
pub async fn deliveries(
    services: &Services,
    account: &Account,
    endpoint_id: &str,
    limit: u32,
) -> Result<Vec<WebhookDelivery>, ServiceError> {
    services
        .store
        .webhook_endpoint(&account.id, endpoint_id)
        .await?
        .ok_or_else(|| unknown(endpoint_id))?;
    Ok(services
        .store
        .webhook_deliveries(&account.id, endpoint_id, limit)
        .await?)
}

/// One delivery: its event's body (what was signed) and every attempt.
pub async fn delivery(
    services: &Services,
    account: &Account,
    id: &str,
) -> Result<(WebhookDelivery, String, Vec<WebhookAttempt>), ServiceError> {
    services
        .store
        .webhook_delivery(&account.id, id)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no webhook delivery with id {id}")))
}

/// Sends a delivery again now: one more attempt, whatever its state.
pub async fn resend(services: &Services, account: &Account, id: &str) -> Result<WebhookDelivery, ServiceError> {
    match services.store.resend_webhook_delivery(&account.id, id).await {
        Ok(Some(delivery)) => Ok(delivery),
        Ok(None) => Err(ServiceError::NotFound(format!("no webhook delivery with id {id}"))),
        Err(StoreError::Conflict(why)) => Err(ServiceError::Conflict(why)),
        Err(other) => Err(other.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_known_ones_or_all() {
        let all = parse_events(&["*".into()]).unwrap();
        assert_eq!(all.len(), EVENT_TYPES.len());
        let some = parse_events(&["job.failed".into(), "job.failed".into(), "key.created".into()]).unwrap();
        assert_eq!(some, vec!["job.failed", "key.created"]);
        assert!(parse_events(&[]).is_err());
        assert!(parse_events(&["payment.made".into()]).is_err());
    }
}
