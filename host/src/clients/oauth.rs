//! The client side of OAuth 2.1 as MCP's authorization asks of a client, for a remote MCP
//! server an agent's owner grants it: finding the server's authorization server (its
//! Protected Resource Metadata, RFC 9728, then the authorization server's metadata, RFC
//! 8414), registering this host as a client (RFC 7591), the authorization request with PKCE
//! and the resource it is for (RFC 8707), and the token requests (code and refresh). Every
//! request goes through the outbound guard to the endpoint's own host, following no
//! redirect, within a time and size limit.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::mcp::grant_of;
use crate::outbound::{Outbound, OutboundRequest, origin_of};

/// Largest metadata or token answer read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum OAuthClientError {
    #[error("{0}")]
    Unreachable(String),
    /// The server's answer is not what OAuth says it must be.
    #[error("{0}")]
    Malformed(String),
    /// The authorization server refused: its `error` and `error_description`.
    #[error("the authorization server refused: {0}")]
    Refused(String),
}

/// Where a server's owner signs in and where tokens come from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    /// The scope the resource asks for, when it says.
    pub scope: Option<String>,
    /// It says it names itself in its answers (`iss`, RFC 9207): one without is refused.
    #[serde(default)]
    pub sends_issuer: bool,
}

/// This host, registered with an authorization server.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Client {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

/// What a token request gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: Option<u64>,
}

/// The requests of one grant, to one server.
pub struct OAuthClient<'a> {
    pub outbound: &'a Outbound,
    pub timeout: Duration,
    /// The MCP server's address: what the grant is for.
    pub resource: String,
}

impl OAuthClient<'_> {
    /// Finds the authorization server of the MCP server at `resource`: from the metadata its
    /// 401 named (`challenge`, a `WWW-Authenticate` value), or at its well-known address.
    pub async fn discover(&self, resource: &str, challenge: Option<&str>) -> Result<AuthServer, OAuthClientError> {
        let named = challenge.and_then(|c| parameter(c, "resource_metadata"));
        let candidates = match named {
            Some(url) => vec![url],
            None => well_known(resource, "oauth-protected-resource"),
        };
        let (metadata, _) = self.first_found(&candidates).await?;
        // The server names the addresses: none may be one the operator opened to plugins
        // though private, unless it is the server's own host.
        // RFC 9728 §3.3: the metadata must be about the resource it was asked for.
        let about = metadata["resource"].as_str().unwrap_or_default();
        if about.trim_end_matches('/') != resource.trim_end_matches('/') {
            return Err(OAuthClientError::Malformed(format!(
                "its protected resource metadata is about {about}, not {resource}"
            )));
        }
        let issuer = metadata["authorization_servers"][0]
            .as_str()
            .ok_or_else(|| OAuthClientError::Malformed("its metadata names no authorization server".into()))?
            .trim_end_matches('/')
            .to_string();
        let scope = challenge.and_then(|c| parameter(c, "scope")).or_else(|| {
            let scopes = metadata["scopes_supported"].as_array()?;
            let names: Vec<&str> = scopes.iter().filter_map(Value::as_str).collect();
            (!names.is_empty()).then(|| names.join(" "))
        });
        self.not_elsewhere_private(&issuer)?;
        let mut candidates = well_known(&issuer, "oauth-authorization-server");
        candidates.extend(well_known(&issuer, "openid-configuration"));
        let (server, _) = self.first_found(&candidates).await?;
        if server["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(issuer.as_str()) {
            return Err(OAuthClientError::Malformed(format!(
                "its authorization server's metadata names another issuer than {issuer}"
            )));
        }
        let s256 = server["code_challenge_methods_supported"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        if !s256 {
            return Err(OAuthClientError::Malformed(
                "its authorization server does not say it supports PKCE with S256".into(),
            ));
        }
        // Its endpoints are its own: a server's metadata cannot send the code, the verifier
        // or a secret to another host (an authorization-server mix-up).
        let issuer_host = host_of(&issuer);
        let endpoint = |name: &str| -> Result<String, OAuthClientError> {
            let url = server[name]
                .as_str()
                .ok_or_else(|| OAuthClientError::Malformed(format!("its authorization server names no {name}")))?;
            self.secure(url)?;
            if host_of(url) != issuer_host {
                return Err(OAuthClientError::Malformed(format!(
                    "its {name} is on another host than its issuer {issuer}"
                )));
            }
            Ok(url.to_string())
        };
        Ok(AuthServer {
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            registration_endpoint: endpoint("registration_endpoint").ok(),
            sends_issuer: server["authorization_response_iss_parameter_supported"] == json!(true),
            issuer,
            scope,
        })
    }

    /// Registers this host as a public client that comes back to `redirect_uri`.
    pub async fn register(
        &self,
        server: &AuthServer,
        redirect_uri: &str,
        name: &str,
    ) -> Result<Client, OAuthClientError> {
        let endpoint = server.registration_endpoint.as_deref().ok_or_else(|| {
            OAuthClientError::Malformed(
                "its authorization server takes no client registration (registration_endpoint)".into(),
            )
        })?;
        let body = json!({
            "redirect_uris": [redirect_uri],
            "client_name": name,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        });
        let (status, answer) = self
            .send("POST", endpoint, "application/json", body.to_string().into_bytes())
            .await?;
        if !(200..300).contains(&status) {
            return Err(refusal(&answer, status));
        }
        let client_id = answer["client_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| OAuthClientError::Malformed("the registration gave no client_id".into()))?;
        Ok(Client {
            client_id: client_id.to_string(),
            client_secret: answer["client_secret"].as_str().map(str::to_string),
        })
    }

    /// Trades the code the owner's consent gave for tokens.
    pub async fn exchange(
        &self,
        server: &AuthServer,
        client: &Client,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
        resource: &str,
    ) -> Result<Tokens, OAuthClientError> {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", resource),
        ];
        self.token(server, client, &mut form).await
    }

    /// New tokens for a refresh token.
    pub async fn refresh(
        &self,
        server: &AuthServer,
        client: &Client,
        refresh_token: &str,
        resource: &str,
    ) -> Result<Tokens, OAuthClientError> {
        let mut form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("resource", resource),
        ];
        self.token(server, client, &mut form).await
    }

    async fn token<'f>(
        &self,
        server: &AuthServer,
        client: &'f Client,
        form: &mut Vec<(&'f str, &'f str)>,
    ) -> Result<Tokens, OAuthClientError> {
        form.push(("client_id", &client.client_id));
        if let Some(secret) = &client.client_secret {
            form.push(("client_secret", secret));
        }
        let body = serde_urlencoded::to_string(&*form)
            .map_err(|e| OAuthClientError::Malformed(format!("cannot write the token request: {e}")))?;
        let (status, answer) = self
            .send(
                "POST",
                &server.token_endpoint,
                "application/x-www-form-urlencoded",
                body.into_bytes(),
            )
            .await?;
        if !(200..300).contains(&status) {
            return Err(refusal(&answer, status));
        }
        let access_token = answer["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| OAuthClientError::Malformed("the token answer has no access_token".into()))?;
        if !answer["token_type"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case("bearer"))
        {
            return Err(OAuthClientError::Malformed("the token is not a bearer token".into()));
        }
        Ok(Tokens {
            access_token: access_token.to_string(),
            refresh_token: answer["refresh_token"].as_str().map(str::to_string),
            expires_in: answer["expires_in"].as_u64(),
        })
    }

    /// The first of `urls` that answers 200 with a JSON object.
    async fn first_found(&self, urls: &[String]) -> Result<(Value, String), OAuthClientError> {
        let mut last = OAuthClientError::Malformed("no metadata address".into());
        for url in urls {
            match self.send("GET", url, "", Vec::new()).await {
                Ok((200, found)) if found.is_object() => return Ok((found, url.clone())),
                Ok((status, _)) => last = OAuthClientError::Malformed(format!("{url} answered HTTP {status}")),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn send(
        &self,
        method: &str,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<(u16, Value), OAuthClientError> {
        self.secure(url)?;
        self.not_elsewhere_private(url)?;
        let grant = grant_of(url).ok_or_else(|| OAuthClientError::Malformed(format!("{url} is not an address")))?;
        let mut headers = vec![("Accept".to_string(), "application/json".to_string())];
        if !content_type.is_empty() {
            headers.push(("Content-Type".into(), content_type.into()));
        }
        let request = OutboundRequest {
            method: method.into(),
            url: url.into(),
            headers,
            body: (!body.is_empty()).then_some(body),
            timeout: Some(self.timeout),
            max_bytes: Some(MAX_ANSWER_BYTES),
            budget: None,
            follow_redirects: false,
            truncate_body: false,
        };
        let answer = self
            .outbound
            .send(request, &[grant])
            .await
            .map_err(|e| OAuthClientError::Unreachable(format!("{url}: {e}")))?;
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok((answer.status, value))
    }
}

impl OAuthClient<'_> {
    /// OAuth's endpoints are https; plain http only on this machine, for a server on this
    /// machine (the owner's browser opens the authorization endpoint: a remote server must
    /// not send it to the owner's own `localhost`).
    fn secure(&self, url: &str) -> Result<(), OAuthClientError> {
        let local_resource = is_local(&self.resource);
        match reqwest::Url::parse(url).map(|u| u.scheme().to_string()) {
            Ok(scheme) if scheme == "https" => Ok(()),
            Ok(scheme) if scheme == "http" && local_resource && is_local(url) => Ok(()),
            _ => Err(OAuthClientError::Malformed(format!("{url} is not https"))),
        }
    }

    /// Refuses an address on a host the operator opened to plugins though private, unless it
    /// is the MCP server's own.
    fn not_elsewhere_private(&self, url: &str) -> Result<(), OAuthClientError> {
        if host_of(url) != host_of(&self.resource) && self.outbound.names_private_exception(url) {
            return Err(OAuthClientError::Malformed(format!(
                "{url} is a private address this server may not send the host to"
            )));
        }
        Ok(())
    }
}

fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url).ok()?.host_str().map(str::to_ascii_lowercase)
}

fn is_local(url: &str) -> bool {
    matches!(host_of(url).as_deref(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

/// A new PKCE verifier (32 random bytes, base64url) and its S256 challenge.
pub fn pkce_pair() -> (String, String) {
    let mut bytes = [0u8; 32];
    crate::random::fill(&mut bytes);
    let verifier = URL_SAFE_NO_PAD.encode(bytes);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// Where the owner is sent to consent.
pub fn authorization_url(
    server: &AuthServer,
    client: &Client,
    redirect_uri: &str,
    state: &str,
    challenge: &str,
    resource: &str,
) -> String {
    let mut query = vec![
        ("response_type", "code"),
        ("client_id", client.client_id.as_str()),
        ("redirect_uri", redirect_uri),
        ("state", state),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("resource", resource),
    ];
    if let Some(scope) = &server.scope {
        query.push(("scope", scope));
    }
    // Plain strings always encode.
    let query = serde_urlencoded::to_string(&query).unwrap_or_default();
    let separator = if server.authorization_endpoint.contains('?') {
        '&'
    } else {
        '?'
    };
    format!("{}{separator}{query}", server.authorization_endpoint)
}

/// The addresses RFC 8414 and RFC 9728 put a document of `name` at, for `url`: with the
/// path after the well-known part, then at the origin's root.
fn well_known(url: &str, name: &str) -> Vec<String> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Vec::new();
    };
    let Some(origin) = origin_of(url) else {
        return Vec::new();
    };
    let path = parsed.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/{name}{path}"));
    }
    urls.push(format!("{origin}/.well-known/{name}"));
    urls
}

/// A parameter of a `WWW-Authenticate: Bearer a="..", b=".."` challenge.
fn parameter(challenge: &str, name: &str) -> Option<String> {
    let at = challenge.find(&format!("{name}="))?;
    let rest = &challenge[at + name.len() + 1..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    (!value.is_empty()).then(|| value.to_string())
}

fn refusal(answer: &Value, status: u16) -> OAuthClientError {
    let error = answer["error"].as_str().unwrap_or("no error code");
    let description = answer["error_description"].as_str().unwrap_or_default();
    let text: String = format!("HTTP {status}, {error} {description}")
        .chars()
        .take(300)
        .collect();
    OAuthClientError::Refused(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_addresses_put_the_path_after_the_name() {
        assert_eq!(
            well_known("https://mcp.example.com/mcp/tools", "oauth-protected-resource"),
            vec![
                "https://mcp.example.com/.well-known/oauth-protected-resource/mcp/tools",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            well_known("https://auth.example.com", "oauth-authorization-server"),
            vec!["https://auth.example.com/.well-known/oauth-authorization-server"]
        );
    }

    #[test]
    fn a_challenge_names_its_metadata_and_scope() {
        let challenge =
            r#"Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp/a", scope="mcp""#;
        assert_eq!(
            parameter(challenge, "resource_metadata").as_deref(),
            Some("https://h/.well-known/oauth-protected-resource/mcp/a")
        );
        assert_eq!(parameter(challenge, "scope").as_deref(), Some("mcp"));
        assert_eq!(
            parameter("Bearer error=invalid_token", "error").as_deref(),
            Some("invalid_token")
        );
        assert_eq!(parameter("Bearer", "scope"), None);
    }

    #[test]
    fn the_consent_address_carries_pkce_and_the_resource() {
        let server = AuthServer {
            issuer: "https://auth.example.com".into(),
            authorization_endpoint: "https://auth.example.com/authorize".into(),
            token_endpoint: "https://auth.example.com/token".into(),
            registration_endpoint: None,
            scope: Some("mcp read".into()),
            sends_issuer: true,
        };
        let client = Client {
            client_id: "abc".into(),
            client_secret: None,
        };
        let (verifier, challenge) = pkce_pair();
        assert!(crate::services::oauth::pkce::verifies(&verifier, &challenge));
        let url = authorization_url(
            &server,
            &client,
            "https://me/cb",
            "st",
            &challenge,
            "https://mcp.example.com/mcp",
        );
        let parsed = reqwest::Url::parse(&url).unwrap();
        let query: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(query["code_challenge"], challenge);
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(query["resource"], "https://mcp.example.com/mcp");
        assert_eq!(query["redirect_uri"], "https://me/cb");
        assert_eq!(query["scope"], "mcp read");
        assert_eq!(query["state"], "st");
    }

    #[test]
    fn endpoints_are_https_or_this_machine_for_a_server_on_it() {
        let outbound = crate::outbound::Outbound::new(crate::outbound::OutboundPolicy {
            allowed_hosts: vec![crate::outbound::HostPattern::parse("*").unwrap()],
            private_exceptions: vec![crate::outbound::HostPattern::parse("internal.example").unwrap()],
            allowed_ports: vec![80, 443],
            own_addresses: vec![],
            own_names: vec![],
            max_response_bytes: 1024,
            max_timeout: Duration::from_secs(2),
            max_redirects: 0,
            marker: None,
        })
        .unwrap();
        let client = |resource: &str| OAuthClient {
            outbound: &outbound,
            timeout: Duration::from_secs(1),
            resource: resource.into(),
        };
        let remote = client("https://mcp.example.com/mcp");
        assert!(remote.secure("https://auth.example.com/token").is_ok());
        assert!(remote.secure("http://auth.example.com/token").is_err());
        assert!(
            remote.secure("http://127.0.0.1:8080/authorize").is_err(),
            "not the owner's own machine"
        );
        assert!(remote.secure("ftp://auth.example.com/").is_err());
        let local = client("http://127.0.0.1:9000/mcp");
        assert!(local.secure("http://127.0.0.1:9000/token").is_ok());
        // A host the operator opened though private is the server's own to name, no one else's.
        assert!(remote.not_elsewhere_private("https://internal.example/token").is_err());
        assert!(remote.not_elsewhere_private("https://auth.example.com/token").is_ok());
        let internal = client("https://internal.example/mcp");
        assert!(internal.not_elsewhere_private("https://internal.example/token").is_ok());
    }
}
