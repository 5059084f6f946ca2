//! Posting on the agent's X account. Tokens (OAuth 2.0 user tokens) are sealed at rest;
//! an expired or refused access token is refreshed once, and the new tokens are stored.
//! Media URLs are fetched through the same outbound guard as plugins (public addresses
//! only, size and time caps), recognised by content, and uploaded before the post.
//!
//! Statuses the API leaves open: `social_media_upload_failed` 502 (X refused or could not
//! process the media; a URL that cannot be fetched or is not an image/video is a 400
//! `validation_error`), `social_api_error` 400 when X calls the post invalid, else 502.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::integrations::{self, IntegrationKind};
use super::social_text::{self, MediaKind};
use super::{ServiceError, Services};
use crate::clients::x::{NewPost, PostMedia, PostReply, XError};
use crate::domain::Agent;
use crate::outbound::{HostPattern, OutboundError, OutboundRequest};

pub const KIND: IntegrationKind = IntegrationKind::Social;

/// Why a post did not go out. X's own `detail` says what it refused; a transport failure's
/// text is only logged.
#[derive(Debug, thiserror::Error)]
pub enum SocialError {
    #[error("agent '{0}' has no social account connected")]
    NotConnected(String),
    /// Posting is switched off in the agent's manifest.
    #[error("posting is disabled for agent '{0}' ([social] enabled = false)")]
    Disabled(String),
    #[error("the social account's tokens are expired or revoked; connect it again")]
    Unauthorized,
    #[error("X refused: {0} (the account's tokens need write permission)")]
    Forbidden(String),
    /// X's limit; `reset_at` in Unix seconds when X said.
    #[error("X rate limit: {detail}")]
    RateLimited { detail: String, reset_at: Option<i64> },
    #[error("this server has no X app credentials (social_client_id)")]
    NotConfigured,
    #[error("X did not take the media: {0}")]
    MediaUploadFailed(String),
    /// X calls the post itself invalid.
    #[error("X: {0}")]
    Invalid(String),
    #[error("X: {0}")]
    Upstream(String),
    #[error("X could not be reached: {0}")]
    Unreachable(String),
}

pub struct Post {
    pub text: Option<String>,
    pub media_urls: Vec<String>,
    pub reply_to: Option<String>,
}

/// Stores the account's tokens sealed, after checking them with `GET /2/users/me`.
pub async fn connect(
    services: &Services,
    agent: &Agent,
    access_token: &str,
    refresh_token: Option<&str>,
    expires_in: Option<i64>,
) -> Result<String, ServiceError> {
    if !is_bearer_token(access_token) {
        return Err(ServiceError::Validation(
            "access_token is not an OAuth 2.0 bearer token (letters, digits and -._~+/, then any =)".into(),
        ));
    }
    let me = services.x.me(access_token).await.map_err(|e| match e {
        XError::Status { detail, .. } => ServiceError::Validation(format!("X refused the access token: {detail}")),
        XError::Transport(m) => SocialError::Unreachable(m).into(),
    })?;
    let username = me["data"]["username"].as_str().unwrap_or_default().to_string();
    // X's tokens live two hours; anything past a year is a client's mistake, not a date.
    let expires_at = expires_in.map(|secs| crate::clock::now_ms() / 1000 + secs.clamp(0, 366 * 24 * 3600));
    store_tokens(
        services,
        agent,
        access_token,
        refresh_token,
        expires_at,
        &username,
        me["data"]["id"].clone(),
    )
    .await?;
    Ok(username)
}

/// RFC 6750's `b64token`: what may follow `Bearer ` in the header it is sent in.
fn is_bearer_token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

async fn store_tokens(
    services: &Services,
    agent: &Agent,
    access: &str,
    refresh: Option<&str>,
    expires_at: Option<i64>,
    username: &str,
    user_id: Value,
) -> Result<(), ServiceError> {
    let secret = XSecret {
        access_token: access.to_string(),
        refresh_token: refresh.map(str::to_string),
        expires_at,
    };
    let public = XPublic {
        username: username.to_string(),
        user_id,
    };
    integrations::save(services, &agent.id, KIND, &secret, &public).await
}

/// The account's OAuth tokens, sealed at rest; `expires_at` in seconds.
#[derive(Serialize, Deserialize)]
struct XSecret {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<i64>,
}

/// What the owner sees of the account.
#[derive(Serialize, Deserialize)]
struct XPublic {
    username: String,
    user_id: Value,
}

struct Session {
    access: String,
    refresh: Option<String>,
    expires_at: Option<i64>,
    username: String,
    user_id: Value,
    refreshed: bool,
}

/// Posts; returns (post id, account username).
pub async fn post(
    services: &Services,
    agent: &Agent,
    agent_ref: &str,
    post: Post,
) -> Result<(String, String), ServiceError> {
    let integration = services
        .store
        .integration(&agent.id, KIND.as_str())
        .await?
        .ok_or_else(|| SocialError::NotConnected(agent_ref.to_string()))?;
    if !integration.enabled {
        return Err(SocialError::Disabled(agent_ref.to_string()).into());
    }
    if services.settings.social.social_client_id.is_none() {
        return Err(SocialError::NotConfigured.into());
    }
    let secret: XSecret = integrations::open(services, &integration)?;
    let public: XPublic = integrations::public(&integration)?;
    let mut session = Session {
        access: secret.access_token,
        refresh: secret.refresh_token,
        expires_at: secret.expires_at,
        username: public.username,
        user_id: public.user_id,
        refreshed: false,
    };
    if session
        .expires_at
        .is_some_and(|at| at <= crate::clock::now_ms() / 1000 + 30)
    {
        refresh(services, agent, &mut session).await?;
    }

    let media = fetch_media(services, &post.media_urls).await?;
    let mut media_ids = Vec::with_capacity(media.len());
    for (kind, bytes) in media {
        let id = with_refresh(services, agent, &mut session, |x, token| {
            let bytes = bytes.clone(); // shares the bytes: a retry after a refresh copies nothing
            async move {
                if kind.is_image() {
                    x.upload_image(&token, bytes, kind.mime()).await
                } else {
                    x.upload_chunked(&token, bytes, kind.mime(), kind.category()).await
                }
            }
        })
        .await
        .map_err(|e| match e {
            ServiceError::Social(SocialError::Invalid(detail) | SocialError::Upstream(detail)) => {
                SocialError::MediaUploadFailed(detail).into()
            }
            other => other,
        })?;
        media_ids.push(id);
    }

    let body = NewPost {
        text: post.text.as_deref().filter(|t| !t.trim().is_empty()),
        media: (!media_ids.is_empty()).then_some(PostMedia { media_ids: &media_ids }),
        reply: post.reply_to.as_deref().map(|id| PostReply {
            in_reply_to_tweet_id: id,
        }),
    };
    let created = with_refresh(services, agent, &mut session, |x, token| {
        let body = body.clone();
        async move { x.post(&token, &body).await }
    })
    .await?;
    let id = created["data"]["id"]
        .as_str()
        .ok_or_else(|| SocialError::Upstream("X's answer has no post id".into()))?;
    Ok((id.to_string(), session.username))
}

/// Runs an X call; on a 401 refreshes the tokens once and runs it again.
async fn with_refresh<T, F, Fut>(
    services: &Services,
    agent: &Agent,
    session: &mut Session,
    call: F,
) -> Result<T, ServiceError>
where
    F: Fn(crate::clients::x::X, String) -> Fut,
    Fut: std::future::Future<Output = Result<T, XError>>,
{
    match call(services.x.clone(), session.access.clone()).await {
        Err(XError::Status { status: 401, .. }) if !session.refreshed => {
            refresh(services, agent, session).await?;
            call(services.x.clone(), session.access.clone()).await.map_err(x_error)
        }
        other => other.map_err(x_error),
    }
}

async fn refresh(services: &Services, agent: &Agent, session: &mut Session) -> Result<(), ServiceError> {
    session.refreshed = true;
    let unauthorized = || ServiceError::from(SocialError::Unauthorized);
    let refresh_token = session.refresh.clone().ok_or_else(unauthorized)?;
    let client_id = services
        .settings
        .social
        .social_client_id
        .clone()
        .ok_or(SocialError::NotConfigured)?;
    let secret = services
        .settings
        .social
        .social_client_secret
        .as_ref()
        .map(|s| s.expose().to_string());
    let tokens = services
        .x
        .refresh(&client_id, secret.as_deref(), &refresh_token)
        .await
        .map_err(|e| match e {
            XError::Status { .. } => unauthorized(),
            XError::Transport(m) => SocialError::Unreachable(m).into(),
        })?;
    session.access = tokens["access_token"].as_str().ok_or_else(unauthorized)?.to_string();
    session.refresh = tokens["refresh_token"]
        .as_str()
        .map(str::to_string)
        .or(session.refresh.take());
    session.expires_at = tokens["expires_in"]
        .as_i64()
        .map(|secs| crate::clock::now_ms() / 1000 + secs);
    let (access, refresh) = (session.access.clone(), session.refresh.clone());
    store_tokens(
        services,
        agent,
        &access,
        refresh.as_deref(),
        session.expires_at,
        &session.username,
        session.user_id.clone(),
    )
    .await
}

fn x_error(err: XError) -> ServiceError {
    let error = match err {
        XError::Status { status: 401, .. } => SocialError::Unauthorized,
        XError::Status {
            status: 403, detail, ..
        } => SocialError::Forbidden(detail),
        XError::Status {
            status: 429,
            detail,
            reset_at,
        } => SocialError::RateLimited { detail, reset_at },
        XError::Status {
            status: 400, detail, ..
        } => SocialError::Invalid(detail),
        XError::Status { detail, .. } => SocialError::Upstream(detail),
        XError::Transport(m) => SocialError::Unreachable(m),
    };
    error.into()
}

/// Downloads each media URL through the outbound guard and recognises it by its bytes.
/// One post's media together stay within `social_media_max_bytes` (each URL may use what
/// the ones before it left), so a post holds at most that much, not four times it.
async fn fetch_media(services: &Services, urls: &[String]) -> Result<Vec<(MediaKind, Bytes)>, ServiceError> {
    let anywhere = [HostPattern::anywhere()];
    let limit = services.settings.social.social_media_max_bytes;
    let mut media: Vec<(MediaKind, Bytes)> = Vec::with_capacity(urls.len());
    for (i, url) in urls.iter().enumerate() {
        let held: u64 = media.iter().map(|(_, bytes)| bytes.len() as u64).sum();
        let request = OutboundRequest {
            method: "GET".into(),
            url: url.clone(),
            headers: vec![],
            body: None,
            timeout: None,
            max_bytes: Some(limit - held),
            budget: None,
            follow_redirects: true,
            truncate_body: false,
        };
        let response = services.outbound.send(request, &anywhere).await.map_err(|e| match e {
            OutboundError::TooLarge(_) => ServiceError::Validation(format!(
                "mediaUrls[{i}]: one post's media may hold {limit} bytes together"
            )),
            e => ServiceError::Validation(format!("mediaUrls[{i}]: {e}")),
        })?;
        if !(200..300).contains(&response.status) {
            return Err(ServiceError::Validation(format!(
                "mediaUrls[{i}]: the server answered HTTP {}",
                response.status
            )));
        }
        let kind = MediaKind::sniff(&response.body).ok_or_else(|| {
            ServiceError::Validation(format!(
                "mediaUrls[{i}]: not a PNG, JPG, GIF, WebP image or an MP4 video"
            ))
        })?;
        media.push((kind, Bytes::from(response.body)));
    }
    social_text::check_mix(&media.iter().map(|(k, _)| *k).collect::<Vec<_>>())
        .map_err(|m| ServiceError::Validation(format!("mediaUrls: {m}")))?;
    Ok(media)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accounts connected before these records were typed read back, and are written the same.
    #[test]
    fn stored_account_records_read_back_and_keep_their_shape() {
        let stored = r#"{"access_token":"a","refresh_token":null,"expires_at":null}"#;
        let secret: XSecret = serde_json::from_str(stored).unwrap();
        assert_eq!(
            (secret.access_token.as_str(), secret.refresh_token.as_deref()),
            ("a", None)
        );
        assert_eq!(serde_json::to_string(&secret).unwrap(), stored);
        let stored = r#"{"username":"u","user_id":"1"}"#;
        let public: XPublic = serde_json::from_str(stored).unwrap();
        assert_eq!((public.username.as_str(), public.user_id.as_str()), ("u", Some("1")));
        assert_eq!(serde_json::to_string(&public).unwrap(), stored);
    }
}
