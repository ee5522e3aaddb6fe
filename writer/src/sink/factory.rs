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
pub async fn connect(
    destination: &Destination,
    metrics: WriterMetrics,
) -> anyhow::Result<Box<dyn Sink>> {
    match destination {
        #[cfg(feature = "ducklake")]
        Destination::DuckLake(cfg) => {
            let cfg = (**cfg).clone();
            let sink =
                tokio::task::spawn_blocking(move || DuckLakeSink::connect(cfg, metrics)).await??;
            Ok(Box::new(sink))
        }
        Destination::Hoglake(cfg) => {
            let handle = tokio::runtime::Handle::current();
            let sink = HoglakeSink::connect((**cfg).clone(), metrics, handle).await?;
            Ok(Box::new(sink))
        }
    }
}
