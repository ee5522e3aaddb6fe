//! The writer binary: parse config, connect the sink, serve Flight and HTTP,
//! exit non-zero when a write exhausts its retries.
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use millpond_shared::metrics::WriterMetrics;
use tokio::sync::watch;

use crate::config::WriterConfig;
use crate::flight::{serve, WriterService};
use crate::health::WriterHealth;
use crate::sink::SharedSink;

pub fn main() -> ExitCode {
    millpond_shared::process::main(
        "millpond-writer",
        WriterConfig::from_env,
        |c| &c.common,
        run,
    )
}

async fn run(cfg: WriterConfig) -> anyhow::Result<()> {
    let registry = cfg.common.registry();
    let metrics = WriterMetrics::new(&registry);
    let hoglake = cfg.sink.name() == "hoglake";
    metrics.announce(
        if hoglake {
            millpond_shared::metrics::error_type::HOGLAKE_COMMIT_CONTENTION
        } else {
            millpond_shared::metrics::error_type::DUCKLAKE_COMMIT_CONTENTION
        },
        hoglake,
    );
    let health = Arc::new(WriterHealth::default());
    millpond_shared::failpoint::arm(cfg.failpoint);
    let sink = crate::sink::factory::connect(&cfg.sink, metrics.clone()).await?;
    let sink: SharedSink = Arc::new(Mutex::new(sink));

    let (fatal_tx, mut fatal_rx) = watch::channel(None::<String>);
    let (stop_tx, stop_rx) = watch::channel(false);
    let service = WriterService::new(sink.clone(), metrics, health.clone(), fatal_tx)
        .with_bounds(
            cfg.max_flush_bytes,
            cfg.max_in_flight_bytes,
            cfg.upload_idle_timeout,
        )
        .with_write_budget(cfg.sink.write_budget());
    let activity = service.activity();
    let mut stop = stop_rx.clone();
    let server = serve(
        cfg.addr,
        service,
        cfg.max_message_bytes,
        cfg.flow_window_bytes,
        async move {
            let _ = stop.wait_for(|s| *s).await;
        },
    )
    .await?;
    // HTTP (and with it /readyz) only once Flight is listening: ready means
    // a flush can be sent.
    let http =
        millpond_shared::http::serve(cfg.common.http_addr(), registry.clone(), health.clone())
            .await?;

    tracing::info!(flight = %server.addr, http = %http, destination = cfg.sink.name(), table = %cfg.sink.qualified_table(), "writer ready");

    let fatal = tokio::select! {
        _ = millpond_shared::shutdown::signal() => None,
        r = fatal_rx.wait_for(Option::is_some) => r.ok().and_then(|v| v.clone()),
    };
    if fatal.is_none() {
        // The pod's ingest gets SIGTERM at the same moment and sends its final
        // flush: keep serving until it says it has stopped (and no DoPut is
        // running), or the grace period ends.
        let since = std::time::Instant::now();
        while !activity.drained() && since.elapsed() < cfg.shutdown_grace {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match activity.awaited_ingest() {
            Some(id) => {
                tracing::warn!(ingest = %id, waited_ms = since.elapsed().as_millis() as u64,
                "grace period over before the pod's ingest said it stopped; stopping anyway")
            }
            None => tracing::info!(
                waited_ms = since.elapsed().as_millis() as u64,
                "draining done; stopping"
            ),
        }
    }
    if fatal.is_some() {
        // Let the failed DoPut's status reach the client before exiting.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop_tx.send(true);
    // Graceful: an in-flight flush completes before the server returns. A
    // streamed flush still arriving (its ingest is not stopping with this
    // writer) is not waited for past STOP_WAIT: its connection may outlive
    // the server task, so once the sink starts closing no flush is written
    // any more (refused as retryable; its ingest sends it again). A write
    // already under way finishes first (it holds the sink).
    let mut task = server.task;
    match tokio::time::timeout(STOP_WAIT, &mut task).await {
        Ok(served) => served??,
        Err(_) => {
            tracing::warn!(
                waited_ms = STOP_WAIT.as_millis() as u64,
                "a flush stream is still open; stopping without it (its ingest sends it again)"
            );
            task.abort();
        }
    }
    activity.close();
    let closed =
        tokio::task::spawn_blocking(move || sink.lock().unwrap_or_else(|p| p.into_inner()).close())
            .await?;
    if let Err(e) = closed {
        tracing::warn!(error = %e.message, "closing the sink failed");
    }
    match fatal {
        Some(reason) => anyhow::bail!("{reason}"),
        None => {
            tracing::info!(
                counts = %millpond_shared::metrics::totals(&registry, &millpond_shared::metrics::conservation::WRITER),
                "writer stopped"
            );
            Ok(())
        }
    }
}

/// Longest wait, once serving stops, for DoPuts still open.
const STOP_WAIT: Duration = Duration::from_secs(5);
