//! OAuth for the MCP endpoints: registered clients, authorization codes, grants and their
//! tokens. Secrets are kept only as their SHA-256; the service compares them. A code is
//! exchanged once (its `grant_id` set in the same write that makes the grant), a refresh
//! token is rotated once (`replaced_at`), so a second use is seen whichever host gets it.

use std::sync::Arc;

use super::accounts::{ACCOUNT_COLUMNS, account_from_row};
use super::sql::{Db, Row, args};
use super::{Store, StoreError};
use crate::domain::Account;

/// A client registered dynamically (RFC 7591).
#[derive(Debug, Clone)]
pub struct OAuthClient {
    pub id: String,
    pub name: Option<String>,
    pub redirect_uris: Vec<String>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub secret_hash: Option<Vec<u8>>,
    /// The registration's answer, as it was given (RFC 7591 §3.2.1).
    pub metadata: String,
    pub created_at: i64,
}

/// What a person allowed, carried by an authorization code until it is exchanged.
#[derive(Debug, Clone)]
pub struct Authorized {
    pub account_id: String,
    pub agent_id: String,
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uri: String,
    pub resource: String,
    pub scope: String,
    /// PKCE's S256 challenge.
    pub code_challenge: String,
    /// The key the person allowed with: the grant works while it does.
    pub key_id: String,
}

#[derive(Debug, Clone)]
pub struct CodeRecord {
    pub id: String,
    pub secret_hash: Vec<u8>,
    pub authorized: Authorized,
    pub expires_at: i64,
    /// Set once the code was exchanged: the grant it made.
    pub grant_id: Option<String>,
}

/// A token to record: `access` or `refresh`.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub id: String,
    pub kind: &'static str,
    pub secret_hash: Vec<u8>,
    pub expires_at: i64,
}

/// A grant as its account sees it.
#[derive(Debug, Clone)]
pub struct GrantInfo {
    pub id: String,
    pub agent_id: String,
    pub client_id: String,
    pub client_name: Option<String>,
    pub resource: String,
    pub scope: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A token with its grant, its account and the agent it is for.
#[derive(Debug, Clone)]
pub struct TokenRecord {
    pub id: String,
    pub kind: String,
    pub secret_hash: Vec<u8>,
    pub expires_at: i64,
    pub replaced_at: Option<i64>,
    pub grant: GrantInfo,
    pub agent_username: Option<String>,
    pub account: Arc<Account>,
    /// The key that allowed the grant works no more (revoked, or past its end).
    pub key_ended: bool,
}

const GRANT_COLUMNS: &str =
    "g.id, g.agent_id, g.client_id, g.client_name, g.resource, g.scope, g.created_at, g.last_used_at, g.revoked_at";

fn grant_from_row(row: &Row, at: usize) -> Result<GrantInfo, StoreError> {
    Ok(GrantInfo {
        id: row.get(at)?,
        agent_id: row.get(at + 1)?,
        client_id: row.get(at + 2)?,
        client_name: row.get(at + 3)?,
        resource: row.get(at + 4)?,
        scope: row.get(at + 5)?,
        created_at: row.get(at + 6)?,
        last_used_at: row.get(at + 7)?,
        revoked_at: row.get(at + 8)?,
    })
}

/// How long an exchanged code's row is kept after it expires: a replay within it is seen.
const CODE_KEPT_MS: i64 = 3_600_000;
/// How long a registered client that was never used is kept.
const UNUSED_CLIENT_KEPT_MS: i64 = 86_400_000;

impl Store {
    /// Records a registered client; clients never used (no code, no grant) a day after they
    /// registered are cleared on the way, so registrations cannot pile up.
    pub async fn insert_oauth_client(&self, client: OAuthClient) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                "DELETE FROM oauth_clients WHERE created_at < ?1
                   AND NOT EXISTS (SELECT 1 FROM oauth_codes c WHERE c.client_id = oauth_clients.id)
                   AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id)",
                args![client.created_at - UNUSED_CLIENT_KEPT_MS],
            )?;
            let uris = serde_json::to_string(&client.redirect_uris).unwrap_or_default();
            db.execute(
                "INSERT INTO oauth_clients (id, name, redirect_uris, auth_method, secret_hash, metadata, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                args![
                    &client.id,
                    &client.name,
                    uris,
                    &client.auth_method,
                    client.secret_hash.clone(),
                    &client.metadata,
                    client.created_at
                ],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn oauth_client(&self, id: &str) -> Result<Option<OAuthClient>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_opt(
                "SELECT id, name, redirect_uris, auth_method, secret_hash, metadata, created_at
                 FROM oauth_clients WHERE id = ?1",
                args![id],
            )?
            .map(|row| {
                let uris: String = row.get(2)?;
                Ok(OAuthClient {
                    id: row.get(0)?,
                    name: row.get(1)?,
                    redirect_uris: serde_json::from_str(&uris)
                        .map_err(|e| StoreError::Corrupt(format!("oauth client redirect_uris: {e}")))?,
                    auth_method: row.get(3)?,
                    secret_hash: row.get(4)?,
                    metadata: row.get(5)?,
                    created_at: row.get(6)?,
                })
            })
            .transpose()
        })
        .await
    }

    /// Records a code; codes long past their end are cleared on the way.
    pub async fn insert_oauth_code(
        &self,
        id: &str,
        secret_hash: Vec<u8>,
        authorized: Authorized,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(move |db| {
            db.execute(
                "DELETE FROM oauth_codes WHERE expires_at < ?1",
                args![now - CODE_KEPT_MS],
            )?;
            let a = &authorized;
            db.execute(
                "INSERT INTO oauth_codes (id, secret_hash, account_id, agent_id, client_id, client_name, redirect_uri,
                                          resource, scope, code_challenge, created_at, expires_at, key_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                args![
                    &id,
                    secret_hash,
                    &a.account_id,
                    &a.agent_id,
                    &a.client_id,
                    &a.client_name,
                    &a.redirect_uri,
                    &a.resource,
                    &a.scope,
                    &a.code_challenge,
                    now,
                    expires_at,
                    &a.key_id
                ],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn oauth_code(&self, id: &str) -> Result<Option<CodeRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_opt(
                "SELECT id, secret_hash, account_id, agent_id, client_id, client_name, redirect_uri, resource, scope,
                        code_challenge, expires_at, grant_id, key_id
                 FROM oauth_codes WHERE id = ?1",
                args![id],
            )?
            .map(|row| {
                Ok(CodeRecord {
                    id: row.get(0)?,
                    secret_hash: row.get(1)?,
                    authorized: Authorized {
                        account_id: row.get(2)?,
                        agent_id: row.get(3)?,
                        client_id: row.get(4)?,
                        client_name: row.get(5)?,
                        redirect_uri: row.get(6)?,
                        resource: row.get(7)?,
                        scope: row.get(8)?,
                        code_challenge: row.get(9)?,
                        key_id: row.get(12)?,
                    },
                    expires_at: row.get(10)?,
                    grant_id: row.get(11)?,
                })
            })
            .transpose()
        })
        .await
    }

    /// Exchanges a code: marks it used and makes its grant with its first tokens, in one
    /// write. `None` when the code was exchanged already (a replay, or a race lost): then
    /// nothing is made, and the grant it made is named for revocation.
    pub async fn exchange_oauth_code(
        &self,
        code_id: &str,
        grant_id: &str,
        now: i64,
        tokens: Vec<NewToken>,
    ) -> Result<Result<(), Option<String>>, StoreError> {
        let (code_id, grant_id) = (code_id.to_string(), grant_id.to_string());
        self.write(move |db| {
            let taken = db.execute(
                "UPDATE oauth_codes SET grant_id = ?2 WHERE id = ?1 AND grant_id IS NULL",
                args![&code_id, &grant_id],
            )?;
            if taken == 0 {
                let earlier: Option<String> = match db.query_opt("SELECT grant_id FROM oauth_codes WHERE id = ?1", args![&code_id])? {
                    Some(row) => row.get(0)?,
                    None => None,
                };
                return Ok(Err(earlier));
            }
            db.execute(
                "INSERT INTO oauth_grants (id, account_id, agent_id, client_id, client_name, resource, scope, key_id, created_at)
                 SELECT ?2, account_id, agent_id, client_id, client_name, resource, scope, key_id, ?3
                 FROM oauth_codes WHERE id = ?1",
                args![&code_id, &grant_id, now],
            )?;
            insert_tokens(db, &grant_id, now, &tokens)?;
            Ok(Ok(()))
        })
        .await
    }

    /// A token (access or refresh) by id, with its grant, account and agent, and whether the
    /// key that allowed the grant still works (`now`).
    pub async fn oauth_token(&self, id: &str, now: i64) -> Result<Option<TokenRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            let sql = format!(
                "SELECT t.id, t.kind, t.secret_hash, t.expires_at, t.replaced_at, ag.username, {GRANT_COLUMNS}, {ACCOUNT_COLUMNS},
                        k.id IS NULL OR k.revoked_at IS NOT NULL OR (k.expires_at IS NOT NULL AND k.expires_at <= ?2)
                 FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
                 JOIN accounts a ON a.id = g.account_id LEFT JOIN agents ag ON ag.id = g.agent_id
                 LEFT JOIN api_keys k ON k.id = g.key_id
                 WHERE t.id = ?1"
            );
            db.query_opt(&sql, args![id, now])?
                .map(|row| {
                    Ok(TokenRecord {
                        id: row.get(0)?,
                        kind: row.get(1)?,
                        secret_hash: row.get(2)?,
                        expires_at: row.get(3)?,
                        replaced_at: row.get(4)?,
                        agent_username: row.get(5)?,
                        grant: grant_from_row(&row, 6)?,
                        account: Arc::new(account_from_row(&row, 15)?),
                        key_ended: row.get(21)?,
                    })
                })
                .transpose()
        })
        .await
    }

    /// Rotates a refresh token: marks it used and records its successors, in one write.
    /// False when it was used already (nothing is recorded): the caller revokes the grant.
    pub async fn rotate_oauth_refresh(
        &self,
        refresh_id: &str,
        grant_id: &str,
        now: i64,
        tokens: Vec<NewToken>,
    ) -> Result<bool, StoreError> {
        let (refresh_id, grant_id) = (refresh_id.to_string(), grant_id.to_string());
        self.write(move |db| {
            let taken = db.execute(
                "UPDATE oauth_tokens SET replaced_at = ?2 WHERE id = ?1 AND replaced_at IS NULL",
                args![&refresh_id, now],
            )?;
            if taken == 0 {
                return Ok(false);
            }
            // Tokens past their end are of no use, not even to tell a reuse.
            db.execute(
                "DELETE FROM oauth_tokens WHERE grant_id = ?1 AND expires_at < ?2",
                args![&grant_id, now],
            )?;
            insert_tokens(db, &grant_id, now, &tokens)?;
            Ok(true)
        })
        .await
    }

    /// Revokes a grant and forgets its tokens; with an account named, only that account's.
    /// The grant as it was, or `None` when there is no such live grant.
    pub async fn revoke_oauth_grant(
        &self,
        grant_id: &str,
        account_id: Option<&str>,
        now: i64,
    ) -> Result<Option<GrantInfo>, StoreError> {
        let (grant_id, account_id) = (grant_id.to_string(), account_id.map(str::to_string));
        self.write(move |db| {
            let sql = format!(
                "SELECT {GRANT_COLUMNS}, g.account_id FROM oauth_grants g WHERE g.id = ?1 AND g.revoked_at IS NULL"
            );
            let Some(row) = db.query_opt(&sql, args![&grant_id])? else {
                return Ok(None);
            };
            let owner: String = row.get(9)?;
            if account_id.as_ref().is_some_and(|a| *a != owner) {
                return Ok(None);
            }
            db.execute(
                "UPDATE oauth_grants SET revoked_at = ?2 WHERE id = ?1",
                args![&grant_id, now],
            )?;
            db.execute("DELETE FROM oauth_tokens WHERE grant_id = ?1", args![&grant_id])?;
            let mut grant = grant_from_row(&row, 0)?;
            grant.revoked_at = Some(now);
            Ok(Some(grant))
        })
        .await
    }

    /// The account's live grants, newest first.
    pub async fn oauth_grants(&self, account_id: &str) -> Result<Vec<GrantInfo>, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            let sql = format!(
                "SELECT {GRANT_COLUMNS} FROM oauth_grants g WHERE g.account_id = ?1 AND g.revoked_at IS NULL
                 ORDER BY g.created_at DESC, g.id"
            );
            db.query(&sql, args![account_id])?
                .iter()
                .map(|row| grant_from_row(row, 0))
                .collect()
        })
        .await
    }

    pub async fn touch_oauth_grant(&self, grant_id: &str, at: i64) -> Result<(), StoreError> {
        let grant_id = grant_id.to_string();
        self.write(move |db| {
            db.execute(
                "UPDATE oauth_grants SET last_used_at = ?2 WHERE id = ?1",
                args![grant_id, at],
            )?;
            Ok(())
        })
        .await
    }
}

fn insert_tokens(db: &dyn Db, grant_id: &str, now: i64, tokens: &[NewToken]) -> Result<(), StoreError> {
    for token in tokens {
        db.execute(
            "INSERT INTO oauth_tokens (id, grant_id, kind, secret_hash, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            args![
                &token.id,
                grant_id,
                token.kind,
                token.secret_hash.clone(),
                now,
                token.expires_at
            ],
        )?;
    }
    Ok(())
}
