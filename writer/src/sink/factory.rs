//! The one place a sink is built from configuration.
use std::time::Duration;

use millpond_shared::metrics::WriterMetrics;

#[cfg(feature = "ducklake")]
use super::ducklake::DuckLakeSink;
use super::hoglake::HoglakeSink;
use super::Sink;
use crate::config::Destination;

/// Connects the configured destination. DuckLake connects on a blocking
/// thread (DuckDB is synchronous); hoglake resolves its catalog and probes
/// its object store on the runtime, and keeps a handle to it for its writes.
/// `pause_before_commit` is the DuckLake-only failpoint.
pub async fn connect(
    destination: &Destination,
    metrics: WriterMetrics,
    pause_before_commit: Option<Duration>,
) -> anyhow::Result<Box<dyn Sink>> {
    match destination {
        #[cfg(feature = "ducklake")]
        Destination::DuckLake(cfg) => {
            let cfg = (**cfg).clone();
            let sink = tokio::task::spawn_blocking(move || {
                DuckLakeSink::connect(cfg, metrics)
                    .map(|s| s.with_pause_before_commit(pause_before_commit))
            })
            .await??;
            Ok(Box::new(sink))
        }
        Destination::Hoglake(cfg) => {
            if pause_before_commit.is_some() {
                tracing::warn!("MILLPOND_FAILPOINT pause_before_commit applies to DuckLake only; ignored for hoglake");
            }
            let handle = tokio::runtime::Handle::current();
            let sink = HoglakeSink::connect((**cfg).clone(), metrics, handle).await?;
            Ok(Box::new(sink))
        }
    }
}
