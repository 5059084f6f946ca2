//! OAuth clients: registered here (RFC 7591 dynamic registration, which the connectors in
//! use today call) or named by the URL of their metadata document (the MCP revision's
//! Client ID Metadata Documents), fetched through the outbound guard when they ask; and
//! how a client proves itself at the token endpoint.

use reqwest::Url;
use serde_json::{Map, Value, json};

use super::{CLIENT_PREFIX, OAuthError, SCOPE};
use crate::outbound::{HostPattern, OutboundRequest};
use crate::services::{Services, keys};
use crate::store::OAuthClient;

/// Most redirect addresses a client may register, and the longest one: registration needs
/// no credentials, so what it stores is kept small.
const MAX_REDIRECT_URIS: usize = 5;
const MAX_URI_CHARS: usize = 512;
const MAX_NAME_CHARS: usize = 100;
/// A metadata document is small (the draft suggests 5 KB) and quick to serve.
const MAX_DOCUMENT_BYTES: u64 = 5 * 1024;
const DOCUMENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A client as the authorization and token endpoints know it.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub name: Option<String>,
    pub redirect_uris: Vec<String>,
    /// A confidential client's secret's hash; `None` for a public client.
    secret_hash: Option<Vec<u8>>,
    /// Named by its metadata document's URL (not registered here).
    pub by_document: bool,
}

/// What a client presented at the token or revocation endpoint: `client_id` (and
/// `client_secret`) in the form, or HTTP Basic.
#[derive(Debug, Clone, Default)]
pub struct ClientCredentials {
    pub id: Option<String>,
    pub secret: Option<String>,
}

impl Client {
    /// Whether it is who it says: a confidential client's secret must match; a public
    /// client presents none.
    pub fn authenticate(&self, presented: &ClientCredentials) -> Result<(), OAuthError> {
        match (&self.secret_hash, &presented.secret) {
            (None, None) => Ok(()),
            (Some(hash), Some(secret)) if keys::secret_matches(secret, Some(hash)) => Ok(()),
            (None, Some(_)) => Err(OAuthError::new(
                "invalid_client",
                "This client is public: it has no secret to present",
            )),
            _ => Err(OAuthError::new("invalid_client", "Client authentication failed")),
        }
    }

    /// Who the person is asked to trust: the client's name and, for a document, its host.
    pub fn shown_name(&self) -> String {
        let name = self.name.clone().unwrap_or_else(|| "An unnamed client".into());
        match Url::parse(&self.id).ok().filter(|_| self.by_document) {
            Some(url) => format!("{name} ({})", url.host_str().unwrap_or_default()),
            None => name,
        }
    }
}

/// The client `client_id` names: its metadata document (an `https` URL), fetched now, or
/// one registered here.
pub async fn find(services: &Services, client_id: &str) -> Result<Client, OAuthError> {
    if client_id.starts_with("https://") {
        return fetch_document(services, client_id).await;
    }
    let found = if client_id.starts_with(CLIENT_PREFIX) && client_id.len() <= 64 {
        services.store.oauth_client(client_id).await?
    } else {
        None
    };
    let client = found.ok_or_else(|| OAuthError::new("invalid_client", format!("Unknown client '{client_id}'")))?;
    Ok(Client {
        id: client.id,
        name: client.name,
        redirect_uris: client.redirect_uris,
        secret_hash: client.secret_hash,
        by_document: false,
    })
}

/// Registers a client (RFC 7591): its answer, with a secret when the client asked for a
/// secret-based authentication method.
pub async fn register(services: &Services, request: &Value) -> Result<Value, OAuthError> {
    let invalid = |why: String| OAuthError::new("invalid_client_metadata", why);
    let Value::Object(metadata) = request else {
        return Err(invalid("The registration must be a JSON object".into()));
    };
    let redirect_uris = redirect_uris(metadata.get("redirect_uris"))?;
    let name = client_name(metadata.get("client_name")).map_err(invalid)?;
    // RFC 7591's default is a secret sent by HTTP Basic.
    let method = match metadata.get("token_endpoint_auth_method") {
        None => "client_secret_basic",
        Some(Value::String(m)) if ["none", "client_secret_post", "client_secret_basic"].contains(&m.as_str()) => m,
        Some(other) => {
            return Err(invalid(format!(
                "token_endpoint_auth_method {other} is not supported: use none, client_secret_post or client_secret_basic"
            )));
        }
    };
    let grant_types = listed(
        metadata,
        "grant_types",
        &["authorization_code", "refresh_token"],
        "authorization_code",
    )
    .map_err(invalid)?;
    let response_types = listed(metadata, "response_types", &["code"], "code").map_err(invalid)?;
    if let Some(scope) = metadata.get("scope") {
        let fine = scope.as_str().is_some_and(|s| s.split(' ').all(|s| s == SCOPE));
        if !fine {
            return Err(invalid(format!(
                "scope {scope} is not offered: the one scope is {SCOPE}"
            )));
        }
    }
    let (id, _, _) = keys::new_secret(CLIENT_PREFIX);
    let (secret, secret_hash) = match method {
        "none" => (None, None),
        _ => {
            // Hashed whole: a client secret has no id to look it up by.
            let (_, secret, _) = keys::new_secret("ahcs_");
            let hash = keys::hash_secret(&secret);
            (Some(secret), Some(hash.to_vec()))
        }
    };
    let now = crate::clock::now_ms();
    let mut answer = json!({
        "client_id": id,
        "client_id_issued_at": now / 1000,
        "redirect_uris": redirect_uris,
        "token_endpoint_auth_method": method,
        "grant_types": grant_types,
        "response_types": response_types,
        "scope": SCOPE,
    });
    if let Some(name) = &name {
        answer["client_name"] = json!(name);
    }
    // The answer is kept without its addresses, which have their own column.
    let mut kept = answer.clone();
    kept.as_object_mut().map(|a| a.remove("redirect_uris"));
    services
        .store
        .insert_oauth_client(OAuthClient {
            id,
            name,
            redirect_uris,
            auth_method: method.to_string(),
            secret_hash,
            metadata: kept.to_string(),
            created_at: now,
        })
        .await?;
    if let Some(secret) = secret {
        answer["client_secret"] = json!(secret);
        answer["client_secret_expires_at"] = json!(0);
    }
    Ok(answer)
}

/// A Client ID Metadata Document: fetched from its URL (the guard's rules apply: no
/// private address unless the operator allows it), small, its `client_id` its own URL,
/// and public (no secret can be shared through a public document).
async fn fetch_document(services: &Services, url: &str) -> Result<Client, OAuthError> {
    let refused = |why: String| OAuthError::new("invalid_client", why);
    let parsed = Url::parse(url).map_err(|e| refused(format!("client_id is not a URL: {e}")))?;
    let dot_segment = url.split('/').skip(3).any(|s| s == "." || s == "..");
    if url.len() > MAX_URI_CHARS
        || parsed.path() == "/"
        || parsed.fragment().is_some()
        || !parsed.username().is_empty()
        || parsed.password().is_some()
        || dot_segment
    {
        return Err(refused(
            "A client_id URL must be https with a path, and no fragment, credentials or dot segments".into(),
        ));
    }
    let request = OutboundRequest {
        method: "GET".into(),
        url: url.to_string(),
        headers: vec![("accept".into(), "application/json".into())],
        body: None,
        timeout: Some(DOCUMENT_TIMEOUT),
        max_bytes: Some(MAX_DOCUMENT_BYTES),
        budget: None,
        follow_redirects: false,
        truncate_body: false,
    };
    let response = services
        .client_documents
        .send(request, &[HostPattern::anywhere()])
        .await
        .map_err(|e| {
            // Why stays in the log: the guard's words would tell a prober about networks.
            tracing::info!(
                client_id = url,
                "a client's metadata document could not be fetched: {e}"
            );
            refused("The client's metadata document could not be fetched".into())
        })?;
    if response.status != 200 {
        tracing::info!(
            client_id = url,
            status = response.status,
            "a client's metadata document was not served"
        );
        return Err(refused("The client's metadata document could not be fetched".into()));
    }
    let document: Value = serde_json::from_slice(&response.body)
        .map_err(|_| refused("The client's metadata document is not JSON".into()))?;
    let Value::Object(metadata) = document else {
        return Err(refused("The client's metadata document is not a JSON object".into()));
    };
    if metadata.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err(refused("The client's metadata document names another client_id".into()));
    }
    if metadata.contains_key("client_secret") || metadata.contains_key("client_secret_expires_at") {
        return Err(refused("A client's metadata document may not hold a secret".into()));
    }
    match metadata.get("token_endpoint_auth_method").and_then(Value::as_str) {
        None | Some("none") => {}
        Some(other) => {
            return Err(refused(format!(
                "token_endpoint_auth_method {other} is not supported for a metadata document: use none"
            )));
        }
    }
    let redirect_uris = redirect_uris(metadata.get("redirect_uris")).map_err(|e| refused(e.description))?;
    let name = client_name(metadata.get("client_name")).map_err(refused)?;
    Ok(Client {
        id: url.to_string(),
        name,
        redirect_uris,
        secret_hash: None,
        by_document: true,
    })
}

fn redirect_uris(value: Option<&Value>) -> Result<Vec<String>, OAuthError> {
    let invalid = |why: String| OAuthError::new("invalid_redirect_uri", why);
    let Some(Value::Array(list)) = value else {
        return Err(invalid("redirect_uris must be an array of at least one address".into()));
    };
    if list.is_empty() || list.len() > MAX_REDIRECT_URIS {
        return Err(invalid(format!(
            "redirect_uris must hold 1 to {MAX_REDIRECT_URIS} addresses"
        )));
    }
    list.iter()
        .map(|uri| {
            let uri = uri
                .as_str()
                .ok_or_else(|| invalid("each redirect URI must be a string".into()))?;
            check_redirect_uri(uri).map_err(|why| invalid(format!("redirect URI {uri}: {why}")))?;
            Ok(uri.to_string())
        })
        .collect()
}

/// An address the code may be sent to: `https`, `http` on this machine's loopback only (a
/// native client listening), or an app's own scheme; never a fragment, and no scheme a
/// browser would run (`javascript:`, `data:`…).
pub(super) fn check_redirect_uri(uri: &str) -> Result<(), &'static str> {
    if uri.len() > MAX_URI_CHARS {
        return Err("too long");
    }
    let url = Url::parse(uri).map_err(|_| "not an absolute URI")?;
    if url.fragment().is_some() {
        return Err("a fragment is not allowed");
    }
    match url.scheme() {
        "https" if url.host_str().is_some() => Ok(()),
        "http" if matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]")) => Ok(()),
        "http" | "https" => Err("http is only for a loopback address (localhost, 127.0.0.1, [::1])"),
        "javascript" | "data" | "file" | "vbscript" | "blob" | "about" | "ws" | "wss" | "ftp" => {
            Err("this scheme cannot receive a code")
        }
        // The operating system's own handlers (Windows' ms-*, search-ms…) run things; an
        // app's scheme names the app.
        scheme if scheme.starts_with("ms-") || scheme.contains("search") || scheme == "shell" => {
            Err("this scheme opens the operating system's handlers, not an app")
        }
        _ => Ok(()),
    }
}

fn client_name(value: Option<&Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => {
            let name = name.trim();
            if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
                return Err(format!(
                    "client_name: at most {MAX_NAME_CHARS} characters, no control characters"
                ));
            }
            Ok(Some(name.to_string()).filter(|n| !n.is_empty()))
        }
        Some(_) => Err("client_name must be a string".into()),
    }
}

/// A list field of the registration: each entry one of `allowed`; `default` when absent.
fn listed(metadata: &Map<String, Value>, field: &str, allowed: &[&str], default: &str) -> Result<Vec<String>, String> {
    let Some(value) = metadata.get(field) else {
        return Ok(vec![default.to_string()]);
    };
    let list = value.as_array().ok_or_else(|| format!("{field} must be an array"))?;
    list.iter()
        .map(|entry| match entry.as_str() {
            Some(entry) if allowed.contains(&entry) => Ok(entry.to_string()),
            _ => Err(format!(
                "{field}: {entry} is not supported (only {})",
                allowed.join(", ")
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_addresses_are_https_loopback_or_an_apps_own() {
        for good in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost:6274/oauth/callback",
            "cursor://anysphere.cursor-mcp/oauth/callback",
            "com.example.app:/cb",
        ] {
            assert_eq!(check_redirect_uri(good), Ok(()), "{good}");
        }
        for bad in [
            "http://example.com/cb",
            "https://example.com/cb#frag",
            "javascript:alert(1)",
            "data:text/html,hi",
            "/relative",
            "not a uri",
            "search-ms:query=x",
            "ms-msdt:/id PCWDiagnostic",
            "https://example.com/".repeat(30).as_str(),
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_public_client_presents_no_secret_and_a_confidential_one_its_own() {
        let (_, secret, _) = keys::new_secret("ahcs_");
        let hash = keys::hash_secret(&secret);
        let mut client = Client {
            id: "ahcl_x".into(),
            name: None,
            redirect_uris: vec![],
            secret_hash: None,
            by_document: false,
        };
        let none = ClientCredentials::default();
        let with = |s: &str| ClientCredentials {
            id: None,
            secret: Some(s.into()),
        };
        assert!(client.authenticate(&none).is_ok());
        assert!(client.authenticate(&with(&secret)).is_err());
        client.secret_hash = Some(hash.to_vec());
        assert!(client.authenticate(&with(&secret)).is_ok());
        assert_eq!(client.authenticate(&none).unwrap_err().error, "invalid_client");
        assert!(client.authenticate(&with("ahcs_0000000000000000_wrong")).is_err());
    }
}
