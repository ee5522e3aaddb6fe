//! /metrics, /healthz and /readyz on one small axum server. Every other path
//! answers 404.
use std::net::SocketAddr;
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

#[derive(Clone)]
struct AppState {
    registry: Registry,
    health: Arc<dyn HealthCheck>,
}

pub fn router(registry: Registry, health: Arc<dyn HealthCheck>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .with_state(AppState { registry, health })
}

/// Binds and serves in the background; returns the bound address (port 0
/// picks a free port, which tests use).
pub async fn serve(
    addr: SocketAddr,
    registry: Registry,
    health: Arc<dyn HealthCheck>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = router(registry, health);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "http server stopped");
        }
    });
    Ok(local)
}

async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::render(&s.registry),
    )
        .into_response()
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
