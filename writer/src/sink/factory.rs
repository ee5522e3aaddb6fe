//! The one place a sink is built from configuration.

use millpond_shared::metrics::WriterMetrics;

#[cfg(feature = "ducklake")]
use super::ducklake::DuckLakeSink;
use super::hoglake::HoglakeSink;
use super::Sink;
use crate::config::Destination;

/// Connects the configured destination. DuckLake connects on a blocking
/// thread (DuckDB is synchronous); hoglake resolves its catalog and probes
/// its object store on the runtime, and keeps a handle to it for its writes.
/// `failpoint` is MILLPOND_FAILPOINT; its pauses are DuckLake's only.
pub async fn connect(
    destination: &Destination,
    metrics: WriterMetrics,
    failpoint: Option<String>,
) -> anyhow::Result<Box<dyn Sink>> {
    match destination {
        #[cfg(feature = "ducklake")]
        Destination::DuckLake(cfg) => {
            let cfg = (**cfg).clone();
            let sink = tokio::task::spawn_blocking(move || {
                DuckLakeSink::connect(cfg, metrics).map(|s| s.with_failpoint(failpoint.as_deref()))
            })
            .await??;
            Ok(Box::new(sink))
        }
        Destination::Hoglake(cfg) => {
            if failpoint
                .as_deref()
                .is_some_and(|f| f.starts_with("pause_"))
            {
                tracing::warn!(
                    "MILLPOND_FAILPOINT pauses apply to DuckLake only; ignored for hoglake"
                );
            }
            let handle = tokio::runtime::Handle::current();
            let sink = HoglakeSink::connect((**cfg).clone(), metrics, handle).await?;
            Ok(Box::new(sink))
        }
    }
}
