//! The consume loop: poll, convert, accumulate, flush to the writer, commit
//! offsets after the acknowledgement.
use millpond_shared::failpoint::{self, Failpoint};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use millpond_proto::FlushTrigger;
use millpond_shared::metrics::{dead_letter_reason, error_type, skip_reason, IngestMetrics};
use millpond_shared::shutdown::{Stop, Stopped};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};

use crate::buffer::cost;
use crate::config::IngestConfig;
use crate::delivery::{Delivered, Delivery};
use crate::flight::{WriterClient, SHUTDOWN_GRACE};
use crate::freshness::Freshness;
use crate::health::IngestHealth;
use crate::kafka::{
    commit_offsets, Consumer, Discovery, LagSampler, Record, Retention, RunToLatest,
};
use crate::stages::{Added, Stages};

pub struct Pipeline {
    pub cfg: IngestConfig,
    pub consumer: Consumer,
    pub metrics: IngestMetrics,
    pub health: Arc<IngestHealth>,
    pub stop: Stop,
    /// Committed offset per assigned partition (for lag).
    pub next: HashMap<i32, i64>,
    stages: Stages,
    /// Where the pending flush's delivery to the writer stands.
    delivery: Delivery,
    window: Instant,
    lag: LagSampler,
    discovery: Discovery,
    freshness: Freshness,
    /// Read positions, and the answer to an offset retention took.
    retention: Retention,
    /// MILLPOND_RUN_TO_LATEST: where to stop.
    run_to_latest: Option<RunToLatest>,
    /// When the consumer was last polled: a flush's delivery must end within
    /// the send deadline of it, inside the liveness budget.
    polled: Instant,
}

/// Longest single wait inside one consume call, so shutdown is prompt.
const STOP_CHECK: Duration = Duration::from_millis(250);
/// A poll goes through the stages in parts of at most FLUSH_SIZE / this
/// (by `buffer::cost::record_bound`), and at least [`MIN_PART_BYTES`]:
/// the anchor workload's polls stay whole (1,000 events bound ~9 MB).
const PARTS_PER_FLUSH: usize = 8;
const MIN_PART_BYTES: usize = 1 << 20;

/// A fatal consumer error ends the loop, once the batch polled before it
/// went through.
fn fatal_error(fatal: Option<String>) -> anyhow::Result<()> {
    match fatal {
        Some(e) => anyhow::bail!("the Kafka consumer hit a fatal error: {e}"),
        None => Ok(()),
    }
}

/// max(10, CONSUME_BATCH_SIZE x (1 - fullness)).
pub fn adaptive_batch_size(configured: usize, fullness: f64) -> usize {
    ((configured as f64 * (1.0 - fullness.clamp(0.0, 1.0))) as usize).max(10)
}

/// min(max(time left to flush, 0.1 s), 60 s).
pub fn poll_timeout(interval: Duration, elapsed: Duration) -> Duration {
    interval
        .saturating_sub(elapsed)
        .max(Duration::from_millis(100))
        .min(Duration::from_secs(60))
}

/// Runs a poll's records through the stages a part at a time
/// (`buffer::cost::parts`), streaming what they converted; stops after the
/// part that filled the flush, answering where the rest begins.
fn convert_parts(
    stages: &mut Stages,
    delivery: &mut Delivery,
    freshness: &mut Freshness,
    metrics: &IngestMetrics,
    cfg: &IngestConfig,
    records: &[Record<'_>],
) -> Option<usize> {
    let budget = (cfg.flush.size as usize / PARTS_PER_FLUSH).max(MIN_PART_BYTES);
    for part in cost::parts(records, budget) {
        let end = part.end;
        let started = Instant::now();
        let added = stages.process(&cfg.kafka.topic, &records[part.clone()]);
        freshness.consumed(&records[part], !stages.is_empty());
        metrics
            .arrow_conversion_seconds
            .observe(started.elapsed().as_secs_f64());
        if stages.streams() {
            let unsent = delivery.stream(stages.drain());
            if !unsent.is_empty() {
                stages.restore(unsent);
            }
        }
        Pipeline::count(metrics, &added);
        if end < records.len() && stages.bytes() as u64 >= cfg.flush.size {
            return Some(end);
        }
    }
    None
}

impl Pipeline {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: IngestConfig,
        consumer: Consumer,
        metrics: IngestMetrics,
        writer: WriterClient,
        rt: tokio::runtime::Handle,
        health: Arc<IngestHealth>,
        stop: Stop,
        next: HashMap<i32, i64>,
    ) -> Self {
        let stages = Stages::new(&cfg.stages);
        let delivery = Delivery::new(cfg.clone(), metrics.clone(), writer, rt);
        let retention = Retention::new(&next);
        Pipeline {
            cfg,
            consumer,
            metrics,
            health,
            stop,
            next,
            stages,
            delivery,
            window: Instant::now(),
            lag: LagSampler::default(),
            discovery: Discovery::default(),
            freshness: Freshness::default(),
            retention,
            run_to_latest: None,
            polled: Instant::now(),
        }
    }

    /// The allowlist follows a dynamic source from now on.
    pub fn with_live_allowlist(mut self, live: Option<crate::stages::filter::LiveValues>) -> Self {
        if let Some(live) = live {
            self.stages = self.stages.with_live_allowlist(live.clone());
            self.delivery = self.delivery.with_live_allowlist(live);
        }
        self
    }

    /// Runs until SIGTERM (Ok, after flushing and committing) or a failure
    /// that must crash the process (Err: nothing past the last ack is
    /// committed, so Kafka replays it). A flush the writer did not
    /// acknowledge within [`SHUTDOWN_GRACE`] of SIGTERM is given up, and
    /// that is Ok too: nothing of it was committed, so nothing is lost.
    pub fn run(&mut self) -> anyhow::Result<()> {
        if self.cfg.flush.run_to_latest {
            self.run_to_latest = Some(RunToLatest::start(
                &self.consumer,
                &self.cfg.kafka.topic,
                &self.next,
                &self.stop,
            )?);
        }
        match self.consume() {
            Err(e) if Stopped::caused(&e) => {
                tracing::error!(
                    error = format!("{e:#}"),
                    grace_s = SHUTDOWN_GRACE.as_secs(),
                    "stopping: the writer did not acknowledge the flush in time after SIGTERM; \
                     nothing past the last acknowledged flush was committed, and those records \
                     will be read again from Kafka at the next start"
                );
                Ok(())
            }
            ended => ended,
        }
    }

    /// The loop: until the stop's final flush, MILLPOND_RUN_TO_LATEST's
    /// end, or an error.
    fn consume(&mut self) -> anyhow::Result<()> {
        loop {
            if self
                .run_to_latest
                .as_ref()
                .is_some_and(|r| r.reached_by(&self.consumer, &self.cfg.kafka.topic, &self.next))
            {
                tracing::info!(
                    pending_rows = self.stages.rows(),
                    "MILLPOND_RUN_TO_LATEST: every partition reached its startup high watermark; final flush"
                );
                self.flush(FlushTrigger::Shutdown)?;
                return Ok(());
            }
            if self.stop.is_stopped() {
                tracing::info!(
                    pending_rows = self.stages.rows(),
                    "shutting down: final flush"
                );
                self.flush(FlushTrigger::Shutdown)?;
                return Ok(());
            }
            self.consume_once()?;
            let moved = self.retention.answer(
                &self.consumer,
                &self.cfg.kafka.topic,
                &self.next,
                &self.metrics,
            )?;
            if let Some(r) = self.run_to_latest.as_mut() {
                r.moved(&moved);
            }
            if let Some(e) = self.delivery.refused() {
                return Err(e.into());
            }
            if self.stages.bytes() as u64 >= self.cfg.flush.size {
                self.flush(FlushTrigger::Size)?;
            } else if self.window.elapsed() >= self.cfg.flush.interval {
                if self.stages.is_empty() {
                    self.window = Instant::now();
                } else {
                    self.flush(FlushTrigger::Time)?;
                }
            }
            self.freshness.show(&self.metrics, false);
            self.lag.maybe_sample(
                &self.consumer,
                &self.cfg.kafka.topic,
                &self.next,
                &self.metrics,
            );
            let (delivery, topic) = (&mut self.delivery, self.cfg.kafka.topic.as_str());
            let (cfg, metrics) = (&self.cfg, &self.metrics);
            self.discovery.maybe_assign(
                &self.consumer,
                topic,
                self.cfg.replica_count,
                self.cfg.ordinal,
                &mut self.next,
                &self.metrics,
                &self.stop,
                |deadline| Ok(delivery.recorded_offsets(topic, deadline)?),
                &mut crate::kafka::identity::lazily(|| {
                    crate::kafka::build_reread_consumer(cfg, metrics.clone())
                }),
            );
        }
    }

    /// Polls one batch and runs it through the stages, streaming what they
    /// converted; fails on a fatal consumer error, after the batch.
    fn consume_once(&mut self) -> anyhow::Result<()> {
        let fullness = self.stages.bytes() as f64 / self.cfg.flush.size as f64;
        let batch_size = adaptive_batch_size(self.cfg.kafka.consume_batch_size, fullness);
        self.metrics.consume_batch_size.set(batch_size as i64);
        let timeout = poll_timeout(self.cfg.flush.interval, self.window.elapsed());

        let mut messages = Vec::with_capacity(batch_size);
        let mut fatal = None;
        // The first message may take up to `timeout`; wait in short slices so
        // SIGTERM is noticed promptly. The rest of the batch is what is ready.
        let deadline = Instant::now() + timeout;
        let mut wait = timeout.min(STOP_CHECK);
        while messages.len() < batch_size {
            match self.consumer.poll(wait) {
                None if messages.is_empty()
                    && !self.stop.is_stopped()
                    && Instant::now() < deadline =>
                {
                    self.health.record_poll();
                    wait = deadline
                        .saturating_duration_since(Instant::now())
                        .min(STOP_CHECK);
                    continue;
                }
                None => break,
                Some(Ok(m)) => messages.push(m),
                // Retention took the partition's next offset: answered
                // once this batch went through.
                Some(Err(e)) if self.retention.seen(&e) => break,
                Some(Err(e)) => {
                    self.metrics
                        .errors
                        .with_label_values(&[error_type::KAFKA])
                        .inc();
                    if matches!(e, KafkaError::MessageConsumptionFatal(_)) {
                        tracing::error!(error = %e, "fatal consumer error");
                        fatal = Some(e.to_string());
                    } else {
                        tracing::warn!(error = %e, "consume error");
                    }
                    break;
                }
            }
            wait = Duration::ZERO;
        }
        self.health.record_poll();
        self.polled = Instant::now();
        if messages.is_empty() {
            return fatal_error(fatal);
        }
        let mut per_partition: HashMap<i32, u64> = HashMap::new();
        let records: Vec<Record<'_>> = messages
            .iter()
            .map(|m| {
                *per_partition.entry(m.partition()).or_default() += 1;
                Record::of(m)
            })
            .collect();
        for (p, n) in per_partition {
            self.metrics
                .records_consumed
                .with_label_values(&[&p.to_string()])
                .inc_by(n);
        }
        self.retention.consumed(&records);
        // A part at a time, the flush cut between parts once full: what
        // one poll converts is bounded by FLUSH_SIZE, whatever its shape.
        let full = convert_parts(
            &mut self.stages,
            &mut self.delivery,
            &mut self.freshness,
            &self.metrics,
            &self.cfg,
            &records,
        );
        if let Some(r) = self.run_to_latest.as_mut() {
            r.consumed(&records);
        }
        // The messages borrow the consumer, which a flush commits with:
        // the rest of the poll is copied out before the flush.
        let mut rest: Vec<OwnedMessage> = full
            .map(|at| messages[at..].iter().map(|m| m.detach()).collect())
            .unwrap_or_default();
        drop(records);
        drop(messages);
        while !rest.is_empty() {
            self.flush(FlushTrigger::Size)?;
            let records: Vec<Record<'_>> = rest.iter().map(Record::of).collect();
            let full = convert_parts(
                &mut self.stages,
                &mut self.delivery,
                &mut self.freshness,
                &self.metrics,
                &self.cfg,
                &records,
            );
            drop(records);
            rest.drain(..full.unwrap_or(rest.len()));
        }
        self.metrics.pending_bytes.set(self.stages.bytes() as i64);
        self.metrics
            .buffer_fullness
            .set(self.stages.bytes() as f64 / self.cfg.flush.size as f64);
        fatal_error(fatal)
    }

    /// Counts what the buffer did with one consumed batch.
    fn count(metrics: &IngestMetrics, added: &Added) {
        if added.tombstones > 0 {
            metrics.tombstones.inc_by(added.tombstones as u64);
        }
        for reason in &added.dead_letters {
            // The converter's reasons are what the original counted as a
            // JSON parse skip; records over a limit have their own labels.
            let label = match *reason {
                dead_letter_reason::OVERSIZED_RECORD | dead_letter_reason::TOO_MANY_KEYS => *reason,
                _ => skip_reason::JSON_PARSE,
            };
            metrics.records_skipped.with_label_values(&[label]).inc();
            tracing::debug!(reason, "record is not a row: dead letter");
        }
        for (reason, n) in &added.filtered {
            metrics
                .records_skipped
                .with_label_values(&[reason])
                .inc_by(*n as u64);
        }
        for (target, clean) in &added.coerced {
            if *clean {
                metrics.columns_coerced.with_label_values(&[target]).inc();
            } else {
                metrics
                    .errors
                    .with_label_values(&[error_type::COLUMN_COERCION])
                    .inc();
            }
        }
        if added.invalid_values > 0 {
            metrics
                .errors
                .with_label_values(&[error_type::FILTER_VALUE_INVALID])
                .inc_by(added.invalid_values as u64);
        }
        for (value, n) in &added.matched {
            metrics.filter_matched.inc_by(value, *n as u64);
        }
    }

    fn flush(&mut self, trigger: FlushTrigger) -> anyhow::Result<()> {
        self.window = Instant::now();
        if self.stages.is_empty() {
            return Ok(());
        }
        let rows = self.stages.rows();
        let flush_id = self.delivery.flush_id();
        let staged = self.stages.cut(&self.cfg.kafka.topic, trigger, flush_id)?;
        if let Some((why, first)) = &staged.sort_skipped {
            self.metrics
                .sort_skipped
                .with_label_values(&[why.reason])
                .inc_by(rows as u64);
            if *first {
                tracing::warn!(reason = why.reason, keys = ?why.keys,
                    "MILLPOND_SORT_BY cannot sort this flush; sending it unsorted (said once per reason and keys)");
            }
        }
        let cut = staged.cut;
        let flush_id = cut.descriptor.flush_id.clone();
        let ranges = cut.descriptor.ranges.clone();
        let dead_letters = cut.descriptor.dead_letters.len();
        let bytes = cut.bytes;
        let started = Instant::now();
        // One deadline for the whole delivery, counted from the last poll so
        // a stalled stream before the cut does not add to it: the stream's
        // end, a re-read and the resend all fit (below the liveness budget).
        let until = self.polled + self.cfg.send_deadline;
        let Delivered { ack, whole } = self.delivery.deliver(cut, !self.stages.streams(), until)?;
        failpoint::abort(Failpoint::KillAfterAck);
        commit_offsets(&self.consumer, &ranges, &self.metrics)?;
        self.lag.committed(&ranges, &mut self.next, &self.metrics);
        self.freshness.committed(&ranges, &self.metrics);
        self.metrics
            .batches_flushed
            .with_label_values(&[trigger.label()])
            .inc();
        if let Some(reason) = whole {
            self.metrics
                .flushes_sent_whole
                .with_label_values(&[reason])
                .inc();
        }
        self.metrics.pending_bytes.set(0);
        self.metrics.buffer_fullness.set(0.0);
        tracing::info!(flush_id = %flush_id, trigger = trigger.label(), rows, bytes,
            written = ack.as_ref().map(|a| a.rows_written), dead_letters, outcome = ?ack.as_ref().map(|a| a.outcome()), partitions = ranges.len(),
            ms = started.elapsed().as_millis() as u64, "flush acknowledged and committed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_size_shrinks_with_fullness() {
        assert_eq!(adaptive_batch_size(1000, 0.0), 1000);
        assert_eq!(adaptive_batch_size(1000, 0.5), 500);
        assert_eq!(adaptive_batch_size(1000, 0.999), 10);
        assert_eq!(adaptive_batch_size(1000, 3.0), 10);
    }

    #[test]
    fn timeout_bounds() {
        let s = Duration::from_secs;
        assert_eq!(poll_timeout(s(60), s(10)), s(50));
        assert_eq!(poll_timeout(s(60), s(90)), Duration::from_millis(100));
        assert_eq!(poll_timeout(s(600), s(0)), s(60));
    }
}
