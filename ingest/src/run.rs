//! The ingest binary: config, HTTP, resume points from Kafka and the lake,
//! static assignment, then the consume loop until SIGTERM. SIGTERM (or
//! SIGINT) ends every startup wait at once, and the process exits 0: nothing
//! was consumed yet.
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use millpond_shared::metrics::IngestMetrics;
use millpond_shared::shutdown::{Stop, Stopped};

use crate::config::IngestConfig;
use crate::flight::{SendError, WriterClient};
use crate::health::IngestHealth;
use crate::kafka::{assign, build_consumer, my_partitions, partition_count, resume_points};
use crate::pipeline::Pipeline;
use millpond_proto::ACTION_INGEST_STOPPED;

fn include_mode(cfg: &IngestConfig) -> Option<crate::stages::include::Mode> {
    cfg.stages.include.as_ref().map(|i| i.mode)
}

/// Every series of ingest's closed label sets at 0 (those of stages that
/// are configured), so a scrape lists them before they first move and an
/// alert on `increase() > 0` sees the first one.
fn announce(metrics: &IngestMetrics, cfg: &IngestConfig) {
    use crate::stages::{filter, sort};
    use millpond_shared::metrics::{error_type as e, skip_reason as s, whole_reason};
    let stages = &cfg.stages;
    let mut skipped = vec![
        s::JSON_PARSE,
        s::ALREADY_RECORDED,
        millpond_shared::metrics::dead_letter_reason::OVERSIZED_RECORD,
        millpond_shared::metrics::dead_letter_reason::TOO_MANY_KEYS,
    ];
    if stages.keep.is_some() {
        skipped.extend([
            filter::FIELD_MISSING,
            filter::EXCLUDED,
            filter::VALUE_INVALID,
        ]);
    }
    if stages.drop.is_some() {
        skipped.extend([filter::FIELD_MISSING, filter::DROPPED]);
    }
    for r in skipped {
        metrics.records_skipped.with_label_values(&[r]);
    }
    for t in [
        e::KAFKA,
        e::OFFSET_COMMIT,
        e::FLIGHT,
        e::COLUMN_COERCION,
        e::FILTER_VALUE_INVALID,
    ] {
        metrics.errors.with_label_values(&[t]);
    }
    for t in ["size", "time", "shutdown"] {
        metrics.batches_flushed.with_label_values(&[t]);
    }
    for r in whole_reason::ALL {
        metrics.flushes_sent_whole.with_label_values(&[r]);
    }
    if !stages.sort_by.is_empty() {
        for r in [sort::FIELD_MISSING, sort::UNSORTABLE_TYPE] {
            metrics.sort_skipped.with_label_values(&[r]);
        }
    }
}

/// How long a stopping ingest tries to tell the writer it is done.
const STOPPED_DEADLINE: Duration = Duration::from_secs(5);

pub fn main() -> ExitCode {
    millpond_shared::process::main(
        "millpond-ingest",
        IngestConfig::from_env,
        |c| &c.common,
        run,
    )
}

/// The one deadline rule: ingest's send deadline holds the writer's
/// whole-write budget, or ingest leaves before its first flush (telling the
/// writer not to wait for one).
async fn deadline_holds_the_writers_budget(
    cfg: &IngestConfig,
    writer: &mut WriterClient,
    instance: &str,
) -> anyhow::Result<()> {
    let Some(budget) = writer.writer_budget() else {
        return Ok(());
    };
    if let Err(why) = budget.held_by(cfg.send_deadline) {
        let _ = writer
            .announce(ACTION_INGEST_STOPPED, instance, STOPPED_DEADLINE)
            .await;
        anyhow::bail!(why);
    }
    tracing::info!(
        send_deadline_s = cfg.send_deadline.as_secs(),
        writer_budget_ms = budget.write_budget_ms,
        "the send deadline holds the writer's whole-write budget"
    );
    Ok(())
}

/// The dynamic allowlist, when configured: in authoritative mode the live
/// set the keep filter follows (its first poll is waited for here).
async fn start_allowlist(
    cfg: &IngestConfig,
    registry: &prometheus::Registry,
    stop: &Stop,
) -> anyhow::Result<Option<crate::stages::filter::LiveValues>> {
    let (Some(include), Some(keep)) = (&cfg.stages.include, &cfg.stages.keep) else {
        return Ok(None);
    };
    let include = include.clone();
    let pins = keep.values.clone();
    let metrics = millpond_shared::metrics::IncludeMetrics::new(registry);
    {
        use crate::stages::include::set::{BULK_REMOVAL, EMPTY, TYPE_FLIP};
        for r in [EMPTY, BULK_REMOVAL, TYPE_FLIP] {
            metrics.refused.with_label_values(&[r]);
        }
        for a in ["added", "removed"] {
            metrics.changes.with_label_values(&[a]);
        }
    }
    let stop = stop.clone();
    let source = tokio::task::spawn_blocking(move || {
        crate::stages::include::start(&include, &pins, metrics, &stop)
    })
    .await??;
    Ok(
        (include_mode(cfg) == Some(crate::stages::include::Mode::Authoritative))
            .then_some(source.live),
    )
}

async fn run(cfg: IngestConfig) -> anyhow::Result<()> {
    millpond_shared::failpoint::arm(cfg.failpoint);
    let registry = cfg.common.registry();
    let metrics =
        IngestMetrics::new(&registry).with_matched_values_cap(cfg.stages.matched_values_cap);
    announce(&metrics, &cfg);
    let health = Arc::new(IngestHealth::default());
    let appended = match &cfg.writer_metrics_url {
        Some(url) => Some(crate::writer_metrics::appended(
            url.clone(),
            metrics.writer_metrics_up.clone(),
        )?),
        None => None,
    };
    let http = millpond_shared::http::serve_appending(
        cfg.common.http_addr(),
        registry.clone(),
        health.clone(),
        appended,
    )
    .await?;

    let stop = Stop::on_signal();

    // Every connection announces this instance, so the writer waits for its
    // final flush when the pod stops (even a writer that restarted since).
    let instance = uuid::Uuid::new_v4().to_string();
    let mut writer = WriterClient::new(cfg.writer_addr.clone())
        .announcing(instance.clone())
        .recording(cfg.lake_topic())
        .stopping_on(stop.clone());
    let lake = match writer
        .recorded_offsets(&cfg.kafka.topic, cfg.send_deadline)
        .await
    {
        Err(e @ SendError::Stopped(_)) => return stopped_at_startup(e.into()),
        lake => lake?,
    };
    tracing::info!(partitions_recorded = lake.len(), writer = %cfg.writer_addr, "read offsets recorded in the lake");
    deadline_holds_the_writers_budget(&cfg, &mut writer, &instance).await?;
    let live_allowlist = match start_allowlist(&cfg, &registry, &stop).await {
        Err(e) if Stopped::caused(&e) => return stopped_at_startup(e),
        live => live?,
    };
    let handle = tokio::runtime::Handle::current();
    let task_cfg = cfg.clone();
    let task_metrics = metrics.clone();
    let task_stop = stop.clone();
    let result = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let cfg = task_cfg;
        let consumer = build_consumer(&cfg, task_metrics.clone())?;
        let count = partition_count(&consumer, &cfg.kafka.topic, cfg.kafka.startup_timeout, &task_stop)?;
        let mine = my_partitions(count, cfg.replica_count, cfg.ordinal);
        let mut identity = crate::kafka::identity::lazily(|| {
            crate::kafka::build_reread_consumer(&cfg, task_metrics.clone())
        });
        let resume = resume_points(&consumer, &cfg.kafka.topic, &mine, cfg.kafka.auto_offset_reset, &lake, &task_metrics, &task_stop, &mut identity)?;
        drop(identity);
        for r in &resume {
            tracing::info!(partition = r.partition, start = ?r.start, committed = ?r.committed, lake_next = ?r.lake_next, "partition assigned");
        }
        assign(&consumer, &cfg.kafka.topic, &resume)?;
        let next: HashMap<i32, i64> = resume.iter().map(|r| (r.partition, r.position())).collect();
        tracing::info!(partitions = ?mine, of = count, ordinal = cfg.ordinal, http = %http, "consuming");
        Pipeline::new(cfg, consumer, task_metrics, writer, handle, health, task_stop, next)
            .with_live_allowlist(live_allowlist)
            .run()
    })
    .await?;
    // Final flush acknowledged (or given up on): release the writer either
    // way; an error exit restarts the container, which announces itself anew.
    // After a flush given up on, no time is left to say it.
    let mut writer = WriterClient::new(cfg.writer_addr.clone()).stopping_on(stop);
    if let Err(e) = writer
        .announce(ACTION_INGEST_STOPPED, &instance, STOPPED_DEADLINE)
        .await
    {
        tracing::warn!(error = %e, "could not tell the writer this ingest stopped; it waits out its grace period");
    }
    // A stop that ended the startup waits of the consumer (a flush given
    // up on after the stop is Ok already).
    match result {
        Err(e) if Stopped::caused(&e) => return stopped_at_startup(e),
        result => result?,
    }
    tracing::info!(
        counts = %millpond_shared::metrics::totals(&registry, &millpond_shared::metrics::conservation::INGEST),
        "ingest stopped cleanly"
    );
    Ok(())
}

/// SIGTERM ended a startup wait: nothing was consumed, so nothing is
/// pending, and the exit is clean.
fn stopped_at_startup(e: anyhow::Error) -> anyhow::Result<()> {
    tracing::info!(
        waiting = format!("{e:#}"),
        "ingest stopped before consuming anything"
    );
    Ok(())
}
