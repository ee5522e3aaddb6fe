//! Two ways out for the lake-state metrics: a long-running exporter that
//! reads the catalog every DUCKLAKE_METRICS_INTERVAL_S and serves /metrics
//! (plus /healthz, /readyz) on DUCKLAKE_METRICS_PORT, or one read pushed as
//! a POST of the text exposition (`--once`, e.g. to a Pushgateway's
//! /metrics/job/<job> from a CronJob).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use millpond_shared::config::SecretUrl;
use millpond_shared::http::HealthCheck;
use millpond_shared::metrics::{render, LakeMetrics};
use prometheus::{IntGauge, Registry};

use super::super::catalog::Lake;
use super::super::config::ToolConfig;
use super::collect::{open, refresh};
use super::queries::VAR;
use super::query_gauges::QueryGauges;

fn registry(cfg: &ToolConfig) -> anyhow::Result<(Registry, LakeMetrics, QueryGauges)> {
    let registry = cfg.common.registry();
    let metrics = LakeMetrics::new(&registry);
    let queries = QueryGauges::register(&registry, &metrics, &cfg.metrics.queries)?;
    Ok((registry, metrics, queries))
}

/// The queries checked against the catalog: a query that cannot run there
/// is a configuration error, found when the catalog is first reached.
fn check(queries: &QueryGauges, lake: &Lake) -> anyhow::Result<()> {
    queries.check(lake).map_err(|errors| {
        anyhow!(
            "the queries of {VAR} do not fit the catalog:\n  {}",
            errors.join("\n  ")
        )
    })
}

/// One read; POSTed to `push_url`, or printed when there is none. A failed
/// read still pushes (`millpond_lake_up 0`) before failing the run; a query
/// of DUCKLAKE_METRICS_CONFIG that does not fit the catalog fails it
/// without a push.
pub fn once(cfg: &ToolConfig, push_url: Option<&SecretUrl>) -> anyhow::Result<()> {
    let (registry, m, queries) = registry(cfg)?;
    let lake = open(cfg, &m, &queries);
    if let Ok(lake) = &lake {
        check(&queries, lake)?;
    }
    let read = lake.and_then(|lake| refresh(&lake, cfg, &m, &queries));
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

/// Ready once a read succeeded, and while the last one did. Live until
/// DUCKLAKE_METRICS_MAX_FAILED_READS reads in a row failed, or a read has
/// been running for that many intervals (a catalog that hangs): then a
/// restart reconnects from scratch instead of serving gauges that no longer
/// move. The body says which; the log says more.
struct ExporterHealth {
    ready: AtomicBool,
    failed: AtomicBool,
    /// `lake_consecutive_collect_errors`.
    in_a_row: IntGauge,
    max_failed: u64,
    last_error: Mutex<String>,
    reading_since: Mutex<Option<Instant>>,
    stuck_after: Duration,
}

/// How much of an error /healthz shows.
const REASON_CHARS: usize = 300;

impl ExporterHealth {
    fn new(cfg: &ToolConfig, m: &LakeMetrics) -> ExporterHealth {
        let max_failed = cfg.metrics.max_failed_reads;
        ExporterHealth {
            ready: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            in_a_row: m.consecutive_collect_errors.clone(),
            max_failed,
            last_error: Mutex::new(String::new()),
            reading_since: Mutex::new(None),
            // A minute at least: the first open loads DuckDB's extensions.
            stuck_after: cfg
                .metrics
                .interval
                .saturating_mul(u32::try_from(max_failed).unwrap_or(u32::MAX))
                .max(Duration::from_secs(60)),
        }
    }
}

impl HealthCheck for ExporterHealth {
    fn live(&self) -> Result<(), String> {
        let n = self.in_a_row.get().max(0) as u64;
        if n >= self.max_failed {
            let last = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
            return Err(format!(
                "the last {n} reads of the catalog failed (DUCKLAKE_METRICS_MAX_FAILED_READS is {}); the last: {}",
                self.max_failed,
                last.chars().take(REASON_CHARS).collect::<String>()
            ));
        }
        let since = *self.reading_since.lock().unwrap_or_else(|e| e.into_inner());
        match since.map(|s| s.elapsed()) {
            Some(took) if took > self.stuck_after => Err(format!(
                "a read of the catalog has been running for {} s (more than {} s)",
                took.as_secs(),
                self.stuck_after.as_secs()
            )),
            _ => Ok(()),
        }
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

/// The long-running exporter; returns on SIGTERM or Ctrl-C, or when a
/// query of DUCKLAKE_METRICS_CONFIG does not fit the catalog.
pub async fn serve(cfg: ToolConfig) -> anyhow::Result<()> {
    let (registry, m, queries) = registry(&cfg)?;
    let health = Arc::new(ExporterHealth::new(&cfg, &m));
    let bound =
        millpond_shared::http::serve(cfg.common.http_addr(), registry, health.clone()).await?;
    tracing::info!(http = %bound, target = %cfg.lake.describe(), interval_s = cfg.metrics.interval.as_secs(), queries = cfg.metrics.queries.len(), "lake metrics exporter ready");
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let reader = std::thread::spawn(move || {
        let result = read_loop(&cfg, &m, &queries, &health, &stop_rx);
        let _ = done_tx.send(());
        result
    });
    tokio::select! {
        _ = millpond_shared::shutdown::signal() => {}
        _ = done_rx => {}
    }
    drop(stop_tx);
    tokio::task::spawn_blocking(move || reader.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the catalog reader panicked"))??;
    tracing::info!("lake metrics exporter stopped");
    Ok(())
}

/// Reads the catalog now and then every interval, reconnecting after a
/// failed read, until `stop` is dropped. The queries are checked the first
/// time the catalog opens; a query that does not fit ends the loop.
fn read_loop(
    cfg: &ToolConfig,
    m: &LakeMetrics,
    queries: &QueryGauges,
    health: &ExporterHealth,
    stop: &mpsc::Receiver<()>,
) -> anyhow::Result<()> {
    let mut lake: Option<Lake> = None;
    let mut checked = queries.is_empty();
    loop {
        *health
            .reading_since
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let result = match &lake {
            Some(l) => refresh(l, cfg, m, queries),
            None => match open(cfg, m, queries) {
                Ok(l) => {
                    if !checked {
                        check(queries, &l)?;
                        checked = true;
                    }
                    let r = refresh(&l, cfg, m, queries);
                    lake = Some(l);
                    r
                }
                Err(e) => Err(e),
            },
        };
        *health
            .reading_since
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        match result {
            Ok(()) => {
                health.ready.store(true, Ordering::Relaxed);
                tracing::debug!("lake metrics read");
            }
            Err(e) => {
                health.ready.store(false, Ordering::Relaxed);
                let msg = format!("{e:#}");
                tracing::warn!(error = %msg, in_a_row = m.consecutive_collect_errors.get(), "reading the lake's catalog failed; reconnecting next time");
                *health.last_error.lock().unwrap_or_else(|e| e.into_inner()) = msg;
                health.failed.store(true, Ordering::Relaxed);
                lake = None;
            }
        }
        match stop.recv_timeout(cfg.metrics.interval) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    fn health(max: &str, interval_s: &str) -> (ExporterHealth, LakeMetrics) {
        let cfg = ToolConfig::from_env(&Env::from_pairs([
            ("DUCKLAKE_METRICS_MAX_FAILED_READS", max),
            ("DUCKLAKE_METRICS_INTERVAL_S", interval_s),
        ]))
        .unwrap();
        let m = LakeMetrics::new(&cfg.common.registry());
        (ExporterHealth::new(&cfg, &m), m)
    }

    #[test]
    fn health_fails_after_the_failed_reads_in_a_row_and_a_success_mends_it() {
        let (h, m) = health("3", "60");
        *h.last_error.lock().unwrap() = "connection refused".into();
        for _ in 0..2 {
            m.consecutive_collect_errors.inc();
            assert_eq!(h.live(), Ok(()), "fewer than 3 in a row");
        }
        m.consecutive_collect_errors.inc();
        let why = h.live().unwrap_err();
        assert!(
            why.contains("the last 3 reads") && why.contains("connection refused"),
            "{why}"
        );
        m.consecutive_collect_errors.set(0);
        assert_eq!(h.live(), Ok(()));
    }

    #[test]
    fn a_read_that_hangs_fails_health() {
        let (h, _) = health("2", "60");
        assert_eq!(h.stuck_after, Duration::from_secs(120));
        *h.reading_since.lock().unwrap() = Some(Instant::now());
        assert_eq!(h.live(), Ok(()), "a read under way");
        *h.reading_since.lock().unwrap() = Some(Instant::now() - Duration::from_secs(121));
        assert!(h.live().unwrap_err().contains("running for 121 s"));
        let (short, _) = health("3", "1");
        assert_eq!(
            short.stuck_after,
            Duration::from_secs(60),
            "a minute at least"
        );
    }
}
