//! What every request passes once, before routing: CORS (a preflight is answered here and
//! never routed) and the headers every answer carries. Applied around the whole router
//! rather than with `Router::layer`, which wraps each route and so costs every request a
//! boxed clone of the layer and of its future.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use tower::Service;

use super::cors::Cors;
use super::request_span::{self, REQUEST_ID};

#[derive(Clone)]
pub struct Edge<S> {
    inner: S,
    cors: Arc<Cors>,
}

impl<S> Edge<S> {
    pub fn new(inner: S, cors: Cors) -> Edge<S> {
        Edge {
            inner,
            cors: Arc::new(cors),
        }
    }
}

impl<S> Service<Request> for Edge<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EdgeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (parts, body) = request.into_parts();
        let origin = self.cors.allowed_origin(&parts);
        if parts.method == Method::OPTIONS {
            // Answered here, so the request span never sees it: the id and the count it
            // would have given are given here.
            let started = std::time::Instant::now();
            let mut response = self.cors.preflight(origin);
            let id = request_span::request_id(&parts.headers);
            response.headers_mut().insert(REQUEST_ID, id);
            if let Some(metrics) = crate::telemetry::metrics::metrics() {
                metrics.http_finished(
                    "OPTIONS",
                    None,
                    response.status().as_u16(),
                    started.elapsed().as_secs_f64(),
                );
            }
            return EdgeFuture::Answered {
                response: Some(response),
            };
        }
        EdgeFuture::Routed {
            inner: self.inner.call(Request::from_parts(parts, body)),
            cors: self.cors.clone(),
            origin,
        }
    }
}

pin_project_lite::pin_project! {
    #[project = EdgeProjection]
    pub enum EdgeFuture<F> {
        Answered { response: Option<Response> },
        Routed {
            #[pin]
            inner: F,
            cors: Arc<Cors>,
            origin: Option<HeaderValue>,
        },
    }
}

impl<F> Future for EdgeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            EdgeProjection::Answered { response } => {
                Poll::Ready(Ok(response.take().expect("an answered future is polled once")))
            }
            EdgeProjection::Routed { inner, cors, origin } => {
                let Ok(mut response) = ready!(inner.poll(cx));
                cors.decorate(origin.take(), &mut response);
                secure(&mut response);
                Poll::Ready(Ok(response))
            }
        }
    }
}

/// The API's answers are data, never a page: a browser must not sniff them into HTML, run
/// or load anything from them, or frame them. The console's files set their own policy.
fn secure(response: &mut Response) {
    let headers = response.headers_mut();
    headers
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"));
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tower::ServiceExt;

    use super::*;

    fn edge(routed: Arc<AtomicUsize>) -> Edge<impl Service<Request, Response = Response, Error = Infallible> + Clone> {
        let settings = crate::config::Settings::load(Some(std::path::Path::new("/nonexistent"))).unwrap();
        let route = tower::service_fn(move |_: Request| {
            routed.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, Infallible>(Response::new(axum::body::Body::from("{}"))) }
        });
        Edge::new(route, Cors::new(&settings.server))
    }

    fn request(method: Method, path: &str, origin: &str) -> Request {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::ORIGIN, origin)
            .body(axum::body::Body::empty())
            .unwrap()
    }

    #[tokio::test]
    async fn a_preflight_is_answered_without_routing_and_names_the_payers_origin() {
        let routed = Arc::new(AtomicUsize::new(0));
        let page = "https://shop.example";
        let answer = edge(routed.clone())
            .oneshot(request(Method::OPTIONS, "/x402/base/helper", page))
            .await
            .unwrap();
        assert_eq!(routed.load(Ordering::Relaxed), 0);
        assert_eq!(answer.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], page);
        assert!(
            answer.headers().contains_key(REQUEST_ID),
            "every answer names its request"
        );
        let allowed = answer.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS].to_str().unwrap();
        assert!(allowed.split(',').any(|h| h == "payment-signature"), "{allowed}");
        // The keyed API lends nothing to an origin the operator did not list.
        let keyed = edge(routed.clone())
            .oneshot(request(Method::OPTIONS, "/v1/agents/helper/chat", page))
            .await
            .unwrap();
        assert!(keyed.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
    }

    #[tokio::test]
    async fn every_routed_answer_carries_the_browser_headers() {
        let routed = Arc::new(AtomicUsize::new(0));
        let answer = edge(routed.clone())
            .oneshot(request(Method::POST, "/x402/base/helper", "https://shop.example"))
            .await
            .unwrap();
        assert_eq!(routed.load(Ordering::Relaxed), 1);
        let headers = answer.headers();
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(
            headers[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://shop.example");
        assert!(
            headers[header::ACCESS_CONTROL_EXPOSE_HEADERS]
                .to_str()
                .unwrap()
                .contains("payment-response")
        );
        assert!(headers[header::VARY].to_str().unwrap().starts_with("origin"));
    }
}
