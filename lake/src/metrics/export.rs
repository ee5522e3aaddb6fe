//! Two ways out for the lake-state metrics: a long-running exporter that
//! reads the catalog every DUCKLAKE_METRICS_INTERVAL_S and serves /metrics
//! (plus /healthz, /readyz) on DUCKLAKE_METRICS_PORT, or one read pushed as
//! a POST of the text exposition (`--once`, e.g. to a Pushgateway's
//! /metrics/job/<job> from a CronJob).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{anyhow, bail};
use millpond_shared::config::SecretUrl;
use millpond_shared::http::HealthCheck;
use millpond_shared::metrics::{render, LakeMetrics};
use prometheus::Registry;

use super::super::catalog::Lake;
use super::super::config::ToolConfig;
use super::collect::{open, refresh};

fn registry(cfg: &ToolConfig) -> (Registry, LakeMetrics) {
    let registry = cfg.common.registry();
    let metrics = LakeMetrics::new(&registry);
    (registry, metrics)
}

/// One read; POSTed to `push_url`, or printed when there is none. A failed
/// read still pushes (`millpond_lake_up 0`) before failing the run.
pub fn once(cfg: &ToolConfig, push_url: Option<&SecretUrl>) -> anyhow::Result<()> {
    let (registry, m) = registry(cfg);
    let read = open(cfg, &m).and_then(|lake| refresh(&lake, cfg, &m));
    if read.is_err() {
        m.up.set(0);
    }
    let body = render(&registry);
    match push_url {
        None => print!("{body}"),
        Some(url) => push(url, body)?,
    }
    read
}

/// POSTs `body` to `url`. The URL is shown masked, and what the client or
/// the server says is scrubbed of its parts (user, password, query).
pub(crate) fn push(url: &SecretUrl, body: String) -> anyhow::Result<()> {
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?
        .post(url.expose().clone())
        .header(
            reqwest::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )
        .body(body)
        .send()
        .map_err(|e| {
            anyhow!(
                "pushing metrics to {url}: {}",
                url.scrub(&chain(&e.without_url()))
            )
        })?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().unwrap_or_default();
        bail!(
            "pushing metrics to {url}: HTTP {status}: {}",
            url.scrub(&text.chars().take(200).collect::<String>())
        );
    }
    println!("metrics: pushed to {url} (HTTP {})", status.as_u16());
    Ok(())
}

/// An error and its sources, as `{:#}` shows an anyhow chain.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Ready once a read succeeded, and while the last one did. The body says
/// which; why is in the log.
#[derive(Default)]
struct ExporterHealth {
    ready: AtomicBool,
    failed: AtomicBool,
}

impl HealthCheck for ExporterHealth {
    fn live(&self) -> Result<(), String> {
        Ok(())
    }

    fn ready(&self) -> Result<(), String> {
        if self.ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        Err(if self.failed.load(Ordering::Relaxed) {
            "the last read of the catalog failed; the exporter's log says why".into()
        } else {
            "no read of the catalog yet".into()
        })
    }
}

/// The long-running exporter; returns on SIGTERM or Ctrl-C.
pub async fn serve(cfg: ToolConfig) -> anyhow::Result<()> {
    let (registry, m) = registry(&cfg);
    let health = Arc::new(ExporterHealth::default());
    let bound =
        millpond_shared::http::serve(cfg.common.http_addr(), registry, health.clone()).await?;
    tracing::info!(http = %bound, target = %cfg.lake.describe(), interval_s = cfg.metrics.interval.as_secs(), "lake metrics exporter ready");
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || read_loop(&cfg, &m, &health, &stop_rx));
    millpond_shared::shutdown::signal().await;
    drop(stop_tx);
    tokio::task::spawn_blocking(move || reader.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the catalog reader panicked"))?;
    tracing::info!("lake metrics exporter stopped");
    Ok(())
}

/// Reads the catalog now and then every interval, reconnecting after a
/// failed read, until `stop` is dropped.
fn read_loop(
    cfg: &ToolConfig,
    m: &LakeMetrics,
    health: &ExporterHealth,
    stop: &mpsc::Receiver<()>,
) {
    let mut lake: Option<Lake> = None;
    loop {
        let result = match &lake {
            Some(l) => refresh(l, cfg, m),
            None => open(cfg, m).and_then(|l| {
                let r = refresh(&l, cfg, m);
                lake = Some(l);
                r
            }),
        };
        match result {
            Ok(()) => {
                health.ready.store(true, Ordering::Relaxed);
                tracing::debug!("lake metrics read");
            }
            Err(e) => {
                m.up.set(0);
                health.ready.store(false, Ordering::Relaxed);
                let msg = format!("{e:#}");
                tracing::warn!(error = %msg, "reading the lake's catalog failed; reconnecting next time");
                health.failed.store(true, Ordering::Relaxed);
                lake = None;
            }
        }
        match stop.recv_timeout(cfg.metrics.interval) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => return,
        }
    }
}
