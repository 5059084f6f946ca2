//! `/console`: the account holder's web console, a few static files built into the binary
//! (no CDN, nothing fetched at run time), and the payers' payment page (`pay/`, served at
//! the agents' x402 addresses). The page talks to `/v1/account/...` and the
//! agent endpoints with the key it keeps in the tab's session storage, sent as the
//! `x-api-key` header: no cookie, so no ambient credential for another site to ride on.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;
use crate::error::{ApiError, ApiPath};

/// Only this origin's scripts, styles and requests; images from here or made in the page
/// (the wallet's QR code); DOM sinks that parse HTML refused outright (Trusted Types with
/// no policy), so the page builds every element with `createElement` and `textContent`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' blob:; connect-src 'self'; form-action 'none'; base-uri 'none'; \
     frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

struct Asset {
    path: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $mime:expr) => {
        Asset {
            path: $path,
            mime: $mime,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("js/main.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/chart.js", JS),
    asset!("js/pages/signin.js", JS),
    asset!("js/pages/keys.js", JS),
    asset!("js/pages/agents.js", JS),
    asset!("js/pages/agent.js", JS),
    asset!("js/pages/commands.js", JS),
    asset!("js/pages/chat.js", JS),
    asset!("js/pages/integrations.js", JS),
    asset!("js/pages/wallets.js", JS),
    asset!("js/pages/money.js", JS),
    asset!("js/pages/jobs.js", JS),
    asset!("js/pages/schedules.js", JS),
    asset!("js/pages/logs.js", JS),
    asset!("js/pages/mcp.js", JS),
    asset!("js/pages/a2a.js", JS),
    asset!("js/pages/plugins.js", JS),
    asset!("js/pages/usage.js", JS),
    asset!("js/pages/webhooks.js", JS),
    asset!("js/pages/try.js", JS),
    asset!("pay/index.html", "text/html; charset=utf-8"),
    asset!("pay/pay.js", JS),
    asset!("pay/wallet.js", JS),
    asset!("pay/solana.js", JS),
    asset!("oauth/index.html", "text/html; charset=utf-8"),
    asset!("oauth/consent.js", JS),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console", get(index))
        .route("/console/", get(index))
        .route("/console/{*path}", get(file))
}

async fn index() -> Response {
    serve(&ASSETS[0])
}

/// The payment page a browser gets at an agent's x402 address (`pay/`): the same static
/// files and policy as the console, and no key.
pub(super) fn payment_page() -> Response {
    ASSETS
        .iter()
        .find(|a| a.path == "pay/index.html")
        .map(serve)
        .unwrap_or_else(|| ApiError::not_found("No payment page").into_response())
}

/// The OAuth consent page (`oauth/`, served at `/oauth/authorize`): the console's files and
/// policy; the person signs in there with their key.
pub(super) fn consent_page() -> Response {
    ASSETS
        .iter()
        .find(|a| a.path == "oauth/index.html")
        .map(serve)
        .unwrap_or_else(|| ApiError::not_found("No consent page").into_response())
}

async fn file(ApiPath(path): ApiPath<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|a| a.path == path)
        .map(serve)
        .ok_or_else(|| ApiError::not_found(format!("No console file {path}")))
}

fn serve(asset: &Asset) -> Response {
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    let fixed = |v: &'static str| HeaderValue::from_static(v);
    headers.insert(header::CONTENT_TYPE, fixed(asset.mime));
    headers.insert(header::CONTENT_SECURITY_POLICY, fixed(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, fixed("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, fixed("DENY"));
    headers.insert(header::REFERRER_POLICY, fixed("no-referrer"));
    headers.insert("cross-origin-opener-policy", fixed("same-origin"));
    // Small files, always checked again: a new release is seen at once.
    headers.insert(header::CACHE_CONTROL, fixed("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::ASSETS;

    /// A file added to `host/console` and not listed here would be a 404 in the browser.
    #[test]
    fn every_console_file_is_served() {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    out.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("console");
        let mut files = Vec::new();
        walk(&root, &root, &mut files);
        files.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        served.sort();
        assert_eq!(files, served);
    }
}
