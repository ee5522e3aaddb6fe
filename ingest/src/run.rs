//! The ingest binary: config, HTTP, resume points from Kafka and the lake,
//! static assignment, then the consume loop until SIGTERM.
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use millpond_shared::metrics::{new_registry, IngestMetrics};

use crate::config::IngestConfig;
use crate::flight::WriterClient;
use crate::health::IngestHealth;
use crate::kafka::{assign, build_consumer, my_partitions, partition_count, resume_points};
use crate::pipeline::Pipeline;
use millpond_proto::ACTION_INGEST_STOPPED;

fn include_mode(cfg: &IngestConfig) -> Option<crate::stages::include::Mode> {
    cfg.stages.include.as_ref().map(|i| i.mode)
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

async fn run(cfg: IngestConfig) -> anyhow::Result<()> {
    let registry = new_registry(&cfg.common.pipeline, &cfg.common.broker_source);
    let metrics = IngestMetrics::new(&registry);
    let health = Arc::new(IngestHealth::default());
    let http =
        millpond_shared::http::serve(cfg.common.http_addr(), registry.clone(), health.clone())
            .await?;

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        millpond_shared::shutdown::signal().await;
        flag.store(true, Ordering::SeqCst);
    });

    // Every connection announces this instance, so the writer waits for its
    // final flush when the pod stops (even a writer that restarted since).
    let instance = uuid::Uuid::new_v4().to_string();
    let mut writer = WriterClient::new(cfg.writer_addr.clone())
        .announcing(instance.clone())
        .recording(cfg.lake_topic());
    let lake = writer
        .recorded_offsets(&cfg.kafka.topic, cfg.send_deadline)
        .await?;
    tracing::info!(partitions_recorded = lake.len(), writer = %cfg.writer_addr, "read offsets recorded in the lake");

    // The dynamic allowlist: authoritative mode waits here for its first poll.
    let live_allowlist = match (&cfg.stages.include, &cfg.stages.keep) {
        (Some(include), Some(keep)) => {
            let include = include.clone();
            let pins = keep.values.clone();
            let metrics = millpond_shared::metrics::IncludeMetrics::new(&registry);
            let source = tokio::task::spawn_blocking(move || {
                crate::stages::include::start(&include, &pins, metrics)
            })
            .await??;
            (include_mode(&cfg) == Some(crate::stages::include::Mode::Authoritative))
                .then_some(source.live)
        }
        _ => None,
    };
    let handle = tokio::runtime::Handle::current();
    let task_cfg = cfg.clone();
    let task_metrics = metrics.clone();
    let result = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let cfg = task_cfg;
        let consumer = build_consumer(&cfg, task_metrics.clone())?;
        let count = partition_count(&consumer, &cfg.kafka.topic, cfg.kafka.startup_timeout)?;
        let mine = my_partitions(count, cfg.replica_count, cfg.ordinal);
        let mut identity = crate::kafka::identity::lazily(|| {
            crate::kafka::build_reread_consumer(&cfg, task_metrics.clone())
        });
        let resume = resume_points(&consumer, &cfg.kafka.topic, &mine, cfg.kafka.auto_offset_reset, &lake, &task_metrics, &mut identity)?;
        drop(identity);
        for r in &resume {
            tracing::info!(partition = r.partition, resume = ?r.offset, committed = ?r.committed, lake_next = ?r.lake_next, "partition assigned");
        }
        assign(&consumer, &cfg.kafka.topic, &resume, cfg.kafka.auto_offset_reset)?;
        let next: HashMap<i32, i64> = resume.iter().map(|r| (r.partition, r.position)).collect();
        tracing::info!(partitions = ?mine, of = count, ordinal = cfg.ordinal, http = %http, "consuming");
        Pipeline::new(cfg, consumer, task_metrics, writer, handle, health, stop, next)
            .with_live_allowlist(live_allowlist)
            .run()
    })
    .await?;
    // Final flush acknowledged (or given up on): release the writer either
    // way; an error exit restarts the container, which announces itself anew.
    let mut writer = WriterClient::new(cfg.writer_addr.clone());
    if let Err(e) = writer
        .announce(ACTION_INGEST_STOPPED, &instance, STOPPED_DEADLINE)
        .await
    {
        tracing::warn!(error = %e, "could not tell the writer this ingest stopped; it waits out its grace period");
    }
    result?;
    tracing::info!("ingest stopped cleanly");
    Ok(())
}
