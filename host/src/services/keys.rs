//! API keys: `ahk_<id>_<secret>`. The id (16 hex digits, 64 random bits) is public and
//! names the key in lists; the secret (43 base62 characters, 256 random bits) is shown
//! once and stored only as its SHA-256. Neither part contains `_`, so keys split cleanly.
//! Verification compares hashes in constant time, and does the same work for unknown ids.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ServiceError;
use crate::domain::{Account, ApiKeyInfo, KeyScope};
use crate::rate_window::DAY_MS;
use crate::store::Store;

pub const KEY_PREFIX: &str = "ahk_";
const ID_HEX_LEN: usize = 16;
const SECRET_CHARS: usize = 43;
/// Last-used times are written at most this often per key, to keep reads cheap.
const TOUCH_EVERY_MS: i64 = 60_000;

/// A freshly made key: the only time the full secret exists.
pub struct IssuedKey {
    pub key: String,
    pub info: ApiKeyInfo,
}

/// Who is calling, once their key checked out.
#[derive(Debug, Clone)]
pub struct Caller {
    pub account: Arc<Account>,
    pub scope: KeyScope,
    /// When the caller's own key ends, if it does.
    pub key_ends_at: Option<i64>,
    /// The caller's key; `None` for a caller by OAuth token.
    pub key_id: Option<String>,
}

impl Caller {
    /// Refuses a key whose scope does not include `needed`.
    pub fn require(&self, needed: KeyScope) -> Result<(), ServiceError> {
        if self.scope >= needed {
            return Ok(());
        }
        Err(ServiceError::Forbidden(format!(
            "This API key has scope '{}'; this needs a key with scope '{}'",
            self.scope.as_str(),
            needed.as_str()
        )))
    }

    /// Refuses a key end (`None`: no end) later than the caller's own key's: a key may not
    /// make, or stretch, a key that outlives it.
    pub fn may_set_end(&self, end: Option<i64>) -> Result<(), ServiceError> {
        let Some(own) = self.key_ends_at else {
            return Ok(());
        };
        let own_end = crate::clock::iso(own);
        match end {
            Some(end) if end <= own => Ok(()),
            Some(_) => Err(ServiceError::Forbidden(format!(
                "This API key ends at {own_end}; a key it makes or changes must end by then too"
            ))),
            None => Err(ServiceError::Forbidden(format!(
                "This API key ends at {own_end}; a key it makes or changes must have an end, by then"
            ))),
        }
    }
}

/// How a secret (a key's, a token's) is kept: its SHA-256, compared in constant time.
pub(crate) fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Splits `ahk_<16 hex>_<secret>` into the id (with prefix) and the secret.
fn split_key(presented: &str) -> Option<(&str, &str)> {
    split_secret(presented, KEY_PREFIX)
}

/// A new `<prefix><16 hex>_<43 base62>`: its id (with prefix) and the whole.
pub(crate) fn new_secret(prefix: &str) -> (String, String, [u8; 32]) {
    let id = format!("{prefix}{}", crate::random::hex_token(ID_HEX_LEN / 2));
    let secret = crate::random::alphanumeric(SECRET_CHARS);
    let hash = hash_secret(&secret);
    (id.clone(), format!("{id}_{secret}"), hash)
}

/// Whether a presented secret matches a stored hash (or `None`, an unknown id, which is
/// compared all the same so timing says nothing).
pub(crate) fn secret_matches(secret: &str, stored: Option<&[u8]>) -> bool {
    let presented = hash_secret(secret);
    let matches: bool = presented.ct_eq(stored.unwrap_or(&[0u8; 32])).into();
    matches && stored.is_some()
}

/// Splits `<prefix><16 hex>_<secret>` into the id (with prefix) and the secret.
pub(crate) fn split_secret<'a>(presented: &'a str, prefix: &str) -> Option<(&'a str, &'a str)> {
    let rest = presented.strip_prefix(prefix)?;
    let id_len = prefix.len() + ID_HEX_LEN;
    if rest.len() <= ID_HEX_LEN + 1 || !rest.as_bytes()[..ID_HEX_LEN].iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    if rest.as_bytes()[ID_HEX_LEN] != b'_' {
        return None;
    }
    Some((&presented[..id_len], &presented[id_len + 1..]))
}

/// Accepts a key id with or without its `ahk_` prefix.
pub fn normalise_key_id(id: &str) -> String {
    if id.starts_with(KEY_PREFIX) {
        id.to_string()
    } else {
        format!("{KEY_PREFIX}{id}")
    }
}

/// Most characters of a key's name.
pub const MAX_NAME_CHARS: usize = 64;

/// A key's name as given: trimmed, at most `MAX_NAME_CHARS` printable characters; blank is none.
pub fn parse_name(name: Option<&str>) -> Result<Option<String>, ServiceError> {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(ServiceError::Validation(format!(
            "Invalid field 'name': at most {MAX_NAME_CHARS} characters, no control characters"
        )));
    }
    Ok(Some(name.to_string()))
}

/// The furthest end a key can be given: ten years.
pub const MAX_EXPIRY_DAYS: i64 = 3650;

/// An end `days` days from `now`.
pub fn expiry_in_days(days: i64, now: i64) -> Result<i64, ServiceError> {
    if !(1..=MAX_EXPIRY_DAYS).contains(&days) {
        return Err(ServiceError::Validation(format!(
            "Invalid field 'expires_in_days': {days} is not between 1 and {MAX_EXPIRY_DAYS}"
        )));
    }
    Ok(now + days * DAY_MS)
}

/// An end given as an RFC 3339 time (`2027-01-31T00:00:00Z`), which must be in the future
/// and at most `MAX_EXPIRY_DAYS` away: to end a key now, revoke it.
pub fn expiry_at(text: &str, now: i64) -> Result<i64, ServiceError> {
    let invalid = |why: &str| ServiceError::Validation(format!("Invalid field 'expires_at': {why}"));
    let at = crate::clock::parse_iso(text.trim())
        .ok_or_else(|| invalid("use an RFC 3339 time such as 2027-01-31T00:00:00Z"))?;
    if at <= now {
        return Err(invalid("this time has passed; to end a key now, revoke it"));
    }
    if at > now + MAX_EXPIRY_DAYS * DAY_MS {
        return Err(invalid(&format!("at most {MAX_EXPIRY_DAYS} days from now")));
    }
    Ok(at)
}

/// The CLI's `--expires`: `30d` (days from now) or an RFC 3339 time.
pub fn parse_expires(text: &str, now: i64) -> Result<i64, ServiceError> {
    match text.trim().strip_suffix('d').map(str::parse::<i64>) {
        Some(Ok(days)) => expiry_in_days(days, now),
        _ => expiry_at(text, now),
    }
}

pub async fn issue(
    store: &Store,
    account: &Account,
    scope: KeyScope,
    name: Option<String>,
    expires_at: Option<i64>,
) -> Result<IssuedKey, ServiceError> {
    let (id, key, hash) = new_secret(KEY_PREFIX);
    let info = store
        .insert_key(&id, &account.id, scope, name, expires_at, hash.to_vec())
        .await?;
    Ok(IssuedKey { key, info })
}

/// The account's keys, oldest first (ids and times; never secrets).
pub async fn list(store: &Store, account: &Account) -> Result<Vec<ApiKeyInfo>, ServiceError> {
    Ok(store.list_keys(&account.id).await?)
}

pub fn parse_scope(text: &str) -> Result<KeyScope, ServiceError> {
    KeyScope::parse(text)
        .ok_or_else(|| ServiceError::Validation(format!("unknown key scope '{text}': use one of use, spend, manage")))
}

/// Revokes a key. With an account named, only that account's keys: another's answers as
/// unknown, so key ids cannot be probed.
pub async fn revoke(store: &Store, key_id: &str, account: Option<&Account>) -> Result<ApiKeyInfo, ServiceError> {
    let id = normalise_key_id(key_id.trim());
    store
        .revoke_key(&id, account.map(|a| a.id.as_str()))
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no key with id {key_id}")))
}

/// Renames a key or changes its end (`Some(None)` removes it); `None` leaves a field as it
/// is. An expired key can be given a new end. Scoped to an account as `revoke` is.
pub async fn update(
    store: &Store,
    key_id: &str,
    account: Option<&Account>,
    name: Option<Option<String>>,
    expires_at: Option<Option<i64>>,
) -> Result<ApiKeyInfo, ServiceError> {
    let id = normalise_key_id(key_id.trim());
    store
        .update_key(&id, account.map(|a| a.id.as_str()), name, expires_at)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no key with id {key_id}")))
}

pub async fn authenticate(store: &Store, presented: &str) -> Result<Caller, ServiceError> {
    let invalid = || ServiceError::Unauthorized("Invalid API key".to_string());
    let (id, secret) = split_key(presented.trim()).ok_or_else(invalid)?;
    let record = store.key_for_auth(id).await?;
    let matches = secret_matches(secret, record.as_ref().map(|r| r.secret_hash.as_slice()));
    let record = match record {
        Some(record) if matches => record,
        _ => return Err(invalid()),
    };
    if record.info.revoked_at.is_some() {
        return Err(ServiceError::Unauthorized("This API key has been revoked".to_string()));
    }
    let now = crate::clock::now_ms();
    if let Some(at) = record.info.expires_at.filter(|&at| at <= now) {
        return Err(ServiceError::Unauthorized(format!(
            "This API key expired at {}; ask the account's owner for a new one",
            crate::clock::iso(at)
        )));
    }
    if record.claim_touch(now, TOUCH_EVERY_MS) {
        // Bookkeeping only: the request does not wait for it.
        let store = store.clone();
        let key_id = record.info.id.clone();
        tokio::spawn(async move {
            if let Err(e) = store.touch_key(&key_id, now).await {
                tracing::warn!(error = %e, "could not record key use");
            }
        });
    }
    Ok(Caller {
        account: record.account.clone(),
        scope: record.info.scope,
        key_ends_at: record.info.expires_at,
        key_id: Some(record.info.id.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_only_well_formed_keys() {
        let key = format!("ahk_0123456789abcdef_{}", "A".repeat(43));
        assert_eq!(split_key(&key), Some(("ahk_0123456789abcdef", "A".repeat(43).as_str())));
        assert_eq!(split_key("ahk_0123456789abcdef_"), None);
        assert_eq!(split_key("ahk_0123456789abcdeg_x"), None);
        assert_eq!(split_key("xyz_0123456789abcdef_x"), None);
        assert_eq!(split_key("ahk_short"), None);
        assert_eq!(split_key("ahk_é123456789abcdef_x"), None);
    }

    #[test]
    fn expiry_is_in_days_or_a_future_time() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_expires("30d", now).unwrap(), now + 30 * DAY_MS);
        assert!(parse_expires("0d", now).is_err());
        assert!(parse_expires("3651d", now).is_err());
        let later = parse_expires("2027-12-31T00:00:00Z", 1_790_000_000_000).unwrap();
        assert_eq!(crate::clock::iso(later), "2027-12-31T00:00:00.000Z");
        assert!(parse_expires("2020-01-01T00:00:00Z", now).is_err(), "in the past");
        assert!(parse_expires("2099-01-01T00:00:00Z", now).is_err(), "too far");
        assert!(parse_expires("tomorrow", now).is_err());
    }

    #[test]
    fn key_ids_accept_both_spellings() {
        assert_eq!(normalise_key_id("0123456789abcdef"), "ahk_0123456789abcdef");
        assert_eq!(normalise_key_id("ahk_0123456789abcdef"), "ahk_0123456789abcdef");
    }
}
