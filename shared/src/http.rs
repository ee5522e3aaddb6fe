//! /metrics, /healthz and /readyz on one small axum server. Every other path
//! answers 404. /metrics may append another process's exposition (ingest
//! appends the writer's, so one scrape shows the pod).
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus::Registry;
use tokio::net::TcpListener;

/// Answers whether the process is healthy; `Err` carries a short reason
/// returned with a 503.
pub trait HealthCheck: Send + Sync + 'static {
    fn live(&self) -> Result<(), String>;
    fn ready(&self) -> Result<(), String> {
        self.live()
    }
}

/// Another process's exposition, read at each scrape of /metrics; `None`
/// when it could not be read (its series are left out of that scrape).
pub type Appended =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Option<String>> + Send>> + Send + Sync>;

#[derive(Clone)]
struct AppState {
    registry: Registry,
    health: Arc<dyn HealthCheck>,
    appended: Option<Appended>,
}

pub fn router(registry: Registry, health: Arc<dyn HealthCheck>) -> Router {
    router_appending(registry, health, None)
}

pub fn router_appending(
    registry: Registry,
    health: Arc<dyn HealthCheck>,
    appended: Option<Appended>,
) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .with_state(AppState {
            registry,
            health,
            appended,
        })
}

/// Binds and serves in the background; returns the bound address (port 0
/// picks a free port, which tests use).
pub async fn serve(
    addr: SocketAddr,
    registry: Registry,
    health: Arc<dyn HealthCheck>,
) -> std::io::Result<SocketAddr> {
    serve_appending(addr, registry, health, None).await
}

/// [`serve`], with /metrics appending `appended`'s exposition to the
/// registry's (see [`crate::metrics::merge`]).
pub async fn serve_appending(
    addr: SocketAddr,
    registry: Registry,
    health: Arc<dyn HealthCheck>,
    appended: Option<Appended>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = router_appending(registry, health, appended);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "http server stopped");
        }
    });
    Ok(local)
}

async fn metrics(State(s): State<AppState>) -> Response {
    // Read the other process first: its reader may set a gauge of ours
    // (whether it answered), which this scrape then shows.
    let other = match &s.appended {
        Some(read) => read().await,
        None => None,
    };
    let own = crate::metrics::render(&s.registry);
    let body = match other {
        Some(other) => crate::metrics::merge::merge(&own, &other),
        None => own,
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

fn answer(r: Result<(), String>) -> Response {
    match r {
        Ok(()) => (StatusCode::OK, "ok\n".to_owned()).into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
    }
}

async fn healthz(State(s): State<AppState>) -> Response {
    answer(s.health.live())
}

async fn readyz(State(s): State<AppState>) -> Response {
    answer(s.health.ready())
}
