//! The consume loop: poll, convert, accumulate, flush to the writer, commit
//! offsets after the acknowledgement.
use millpond_shared::failpoint::{self, Failpoint};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use millpond_proto::{FlushAck, FlushDescriptor, FlushTrigger, OffsetRange};
use millpond_shared::metrics::{
    dead_letter_reason, error_type, skip_reason, whole_reason, IngestMetrics,
};
use millpond_shared::shutdown::{Stop, Stopped};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;

use crate::buffer::{record_digest, Added, Cut, Record};
use crate::config::IngestConfig;
use crate::flight::{FlushStream, SendError, WriterClient, SHUTDOWN_GRACE};
use crate::freshness::Freshness;
use crate::health::IngestHealth;
use crate::kafka::{commit_offsets, Consumer, Discovery, LagSampler, RunToLatest};
use crate::stages::Stages;

pub struct Pipeline {
    pub cfg: IngestConfig,
    pub consumer: Consumer,
    pub metrics: IngestMetrics,
    pub writer: WriterClient,
    pub rt: tokio::runtime::Handle,
    pub health: Arc<IngestHealth>,
    pub stop: Stop,
    /// Committed offset per assigned partition (for lag).
    pub next: HashMap<i32, i64>,
    stages: Stages,
    window: Instant,
    /// A fatal consumer error: the loop stops with it.
    fatal: Option<String>,
    /// The writer refused the streamed flush permanently, or ingest gave
    /// up on it after the stop: the loop stops with it, as it does when
    /// this comes at the cut.
    refused: Option<SendError>,
    lag: LagSampler,
    discovery: Discovery,
    freshness: Freshness,
    /// MILLPOND_RUN_TO_LATEST: where to stop.
    run_to_latest: Option<RunToLatest>,
    /// The pending flush's stream to the writer, once a batch was sent.
    stream: Option<FlushStream>,
    /// The pending flush's id, from its first streamed batch.
    flush_id: Option<String>,
    /// The pending flush lost its stream: it is read again from Kafka and
    /// sent whole at its cut.
    broken: bool,
    /// The writer could not be reached when the pending flush's stream was
    /// to open: ingest holds the flush and sends it whole at its cut.
    held: bool,
    /// When the consumer was last polled: a flush's delivery must end within
    /// the send deadline of it, inside the liveness budget.
    polled: Instant,
    /// The dynamic allowlist, for a flush rebuilt from Kafka.
    live: Option<crate::stages::include::LiveValues>,
}

/// Longest wait for the writer to take the next message of a streamed
/// flush (it reads as fast as it decodes); past it the stream is broken.
const STREAM_STALL: Duration = Duration::from_secs(60);

/// How long opening a flush's stream may try to reach the writer before
/// the flush is held and sent whole instead.
const OPEN_DEADLINE: Duration = Duration::from_secs(10);

/// Time left until `until`.
fn left(until: Instant) -> Duration {
    until.saturating_duration_since(Instant::now())
}

/// What a flush rebuilt from Kafka must match: the same records with the
/// same outcome (row, record dead letter, or neither: tombstone or
/// filtered), so the counts ingest already made stay true. Counts alone
/// would pass a rebuild whose allowlist changed to keep other records in
/// the same number; the digests say which records are rows and which are
/// dead letters, and why. Value-level dead letters may differ (which keys
/// overflow the column limit depends on the order columns are first seen)
/// without changing any record's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rebuild {
    flush_id: String,
    trigger: FlushTrigger,
    ranges: Vec<OffsetRange>,
    records: usize,
    rows: u64,
    rows_digest: u64,
    record_dead_letters: usize,
    dead_letters_digest: u64,
}

impl Rebuild {
    fn of(desc: &FlushDescriptor, records: usize, rows_digest: u64) -> Self {
        let letters = desc.dead_letters.iter().filter(|l| !l.value_level);
        let dead_letters_digest = letters.clone().fold(0u64, |sum, l| {
            // FNV-1a of the reason.
            let reason = l.reason.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            sum.wrapping_add(record_digest(l.partition, l.offset) ^ reason)
        });
        Rebuild {
            flush_id: desc.flush_id.clone(),
            trigger: desc.trigger(),
            ranges: desc.ranges.clone(),
            records,
            rows: desc.expected_rows,
            rows_digest,
            record_dead_letters: letters.count(),
            dead_letters_digest,
        }
    }
}

/// How long reading the recorded offsets after an overlap may take.
const OVERLAP_READ_DEADLINE: Duration = Duration::from_secs(30);

/// Why a flush sent again from Kafka was not acknowledged.
#[derive(Debug, thiserror::Error)]
enum Resend {
    #[error(transparent)]
    Rebuild(#[from] anyhow::Error),
    #[error(transparent)]
    Send(SendError),
}

/// The writer refused a flush because it reaches into offsets the lake
/// already recorded under another cut.
fn is_overlap(e: &SendError) -> bool {
    matches!(e, SendError::Permanent { error_type, .. } if error_type == error_type::OFFSETS_OVERLAP)
}

/// Record-level dead letters of a flush.
fn record_letters(desc: &FlushDescriptor) -> u64 {
    desc.dead_letters.iter().filter(|l| !l.value_level).count() as u64
}

/// Longest single wait inside one consume call, so shutdown is prompt.
const STOP_CHECK: Duration = Duration::from_millis(250);

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
        Pipeline {
            cfg,
            consumer,
            metrics,
            writer,
            rt,
            health,
            stop,
            next,
            stages,
            window: Instant::now(),
            fatal: None,
            refused: None,
            lag: LagSampler::default(),
            discovery: Discovery::default(),
            freshness: Freshness::default(),
            run_to_latest: None,
            stream: None,
            flush_id: None,
            broken: false,
            held: false,
            polled: Instant::now(),
            live: None,
        }
    }

    /// The allowlist follows a dynamic source from now on.
    pub fn with_live_allowlist(mut self, live: Option<crate::stages::include::LiveValues>) -> Self {
        if let Some(live) = live {
            self.stages = self.stages.with_live_allowlist(live.clone());
            self.live = Some(live);
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
            self.consume_once();
            if let Some(e) = self.fatal.take() {
                anyhow::bail!("the Kafka consumer hit a fatal error: {e}");
            }
            if let Some(e) = self.refused.take() {
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
            let (writer, rt, topic) = (&mut self.writer, &self.rt, self.cfg.kafka.topic.as_str());
            let (cfg, metrics) = (&self.cfg, &self.metrics);
            self.discovery.maybe_assign(
                &self.consumer,
                topic,
                self.cfg.replica_count,
                self.cfg.ordinal,
                &mut self.next,
                &self.metrics,
                &self.stop,
                |deadline| Ok(rt.block_on(writer.recorded_offsets(topic, deadline))?),
                &mut crate::kafka::identity::lazily(|| {
                    crate::kafka::build_reread_consumer(cfg, metrics.clone())
                }),
            );
        }
    }

    fn consume_once(&mut self) {
        let fullness = self.stages.bytes() as f64 / self.cfg.flush.size as f64;
        let batch_size = adaptive_batch_size(self.cfg.kafka.consume_batch_size, fullness);
        self.metrics.consume_batch_size.set(batch_size as i64);
        let timeout = poll_timeout(self.cfg.flush.interval, self.window.elapsed());

        let mut messages = Vec::with_capacity(batch_size);
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
                Some(Err(e)) => {
                    self.metrics
                        .errors
                        .with_label_values(&[error_type::KAFKA])
                        .inc();
                    if matches!(e, KafkaError::MessageConsumptionFatal(_)) {
                        tracing::error!(error = %e, "fatal consumer error");
                        self.fatal = Some(e.to_string());
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
            return;
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
        let started = Instant::now();
        let added = self.stages.process(&self.cfg.kafka.topic, &records);
        self.freshness.consumed(&records, !self.stages.is_empty());
        if let Some(r) = self.run_to_latest.as_mut() {
            r.consumed(&records);
        }
        self.metrics
            .arrow_conversion_seconds
            .observe(started.elapsed().as_secs_f64());
        drop(records);
        drop(messages);
        if self.stages.streams() {
            self.stream_converted();
        }
        self.count(&added);
        self.metrics.pending_bytes.set(self.stages.bytes() as i64);
        self.metrics
            .buffer_fullness
            .set(self.stages.bytes() as f64 / self.cfg.flush.size as f64);
    }

    /// Sends the batches converted since the last call on the flush's
    /// stream, opening it on the first. If the writer cannot be reached
    /// before anything was sent, the flush is held and sent whole at its
    /// cut. A stream that breaks later marks the flush broken: what it
    /// carried is gone, so the flush is read again from Kafka at its cut.
    fn stream_converted(&mut self) {
        if self.held {
            return;
        }
        let stall = self.cfg.send_deadline.min(STREAM_STALL);
        let mut batches = self.stages.drain().into_iter();
        while let Some(batch) = batches.next() {
            if self.broken {
                continue;
            }
            let sent = match self.stream.as_mut() {
                Some(s) => self.rt.block_on(s.push(&batch, stall)),
                None => {
                    let id = self
                        .flush_id
                        .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
                        .clone();
                    let open = OPEN_DEADLINE.min(self.cfg.send_deadline);
                    match self.rt.block_on(self.writer.open(&id, &batch, open)) {
                        Ok(s) => {
                            self.stream = Some(s);
                            Ok(())
                        }
                        Err(e @ (SendError::Permanent { .. } | SendError::Stopped(_))) => Err(e),
                        Err(e) => {
                            tracing::warn!(error = %e, flush_id = %id,
                                "cannot open a stream to the writer; holding this flush and sending it whole at its cut");
                            self.writer.reset();
                            self.held = true;
                            self.stages
                                .restore(std::iter::once(batch).chain(batches).collect());
                            return;
                        }
                    }
                }
            };
            if let Err(e @ (SendError::Permanent { .. } | SendError::Stopped(_))) = sent {
                self.stream = None;
                self.broken = true;
                self.refused = Some(e);
                continue;
            }
            if let Err(e) = sent {
                self.metrics
                    .errors
                    .with_label_values(&[error_type::FLIGHT])
                    .inc();
                tracing::warn!(error = %e, flush_id = ?self.flush_id,
                    "the flush's stream to the writer broke; the flush will be read again from Kafka and sent whole");
                self.stream = None;
                self.writer.reset();
                self.broken = true;
            }
        }
    }

    /// Sends a flush again from Kafka, before `until`: its ranges are read
    /// again into a flush of the same id, which must cover the same records
    /// with the same outcome, and sent whole. For a flush whose stream
    /// broke.
    fn resend_from_kafka(&mut self, want: &Rebuild, until: Instant) -> Result<FlushAck, Resend> {
        if self.writer.past_grace() {
            return Err(Resend::Send(SendError::from(Stopped)));
        }
        let (full, _) = self.rebuild(want, &HashMap::new(), until)?;
        let sent = self.rt.block_on(self.writer.send(
            &full.descriptor,
            full.schema,
            &full.batches,
            left(until),
        ));
        sent.map_err(Resend::Send)
    }

    /// Reads `want`'s ranges again from Kafka into the same flush (checked
    /// against `want`), and into the flush of only the records past `skip`
    /// (partition -> last offset to leave out).
    fn rebuild(
        &mut self,
        want: &Rebuild,
        skip: &HashMap<i32, i64>,
        until: Instant,
    ) -> anyhow::Result<(Cut, Cut)> {
        let started = Instant::now();
        let stages = || {
            let s = Stages::new(&self.cfg.stages);
            match &self.live {
                Some(live) => s.with_live_allowlist(live.clone()),
                None => s,
            }
        };
        let (mut full, mut rest) = (stages(), stages());
        let consumer = crate::kafka::build_reread_consumer(&self.cfg, self.metrics.clone())?;
        let topic = self.cfg.kafka.topic.clone();
        crate::kafka::reread(&consumer, &want.ranges, left(until), |records| {
            full.process(&topic, records);
            if !skip.is_empty() {
                let past: Vec<Record<'_>> = records
                    .iter()
                    .filter(|r| skip.get(&r.partition).is_none_or(|s| r.offset > *s))
                    .copied()
                    .collect();
                rest.process(&topic, &past);
            }
        })?;
        drop(consumer);
        let full = full.cut(&topic, want.trigger, want.flush_id.clone())?.cut;
        let got = Rebuild::of(&full.descriptor, full.records, full.rows_digest);
        if got != *want {
            // Ranges, records or their outcome differ (records gone from
            // Kafka, an allowlist changed meanwhile): exit, and let the
            // restart resume from the lake's and Kafka's offsets.
            anyhow::bail!(
                "flush {} read again from Kafka is not the flush that was streamed ({got:?} against {want:?}); not sending it",
                want.flush_id
            );
        }
        let rest = rest
            .cut(&topic, want.trigger, uuid::Uuid::new_v4().to_string())?
            .cut;
        tracing::info!(flush_id = %want.flush_id, rows = full.descriptor.expected_rows,
            ms = started.elapsed().as_millis() as u64, "flush read again from Kafka");
        Ok((full, rest))
    }

    /// The writer refused the flush because another owner of a partition
    /// already recorded some of its offsets (a handover: the old owner's
    /// last flushes land after this pod read the lake's offsets). Reads
    /// the recorded offsets, rebuilds the flush from Kafka without what
    /// they cover and sends the rest, until the writer takes it or none is
    /// left. Returns how many rows and record dead letters were left out:
    /// the other owner wrote them.
    fn send_unrecorded(&mut self, want: &Rebuild, until: Instant) -> anyhow::Result<u64> {
        loop {
            let topic = self.cfg.kafka.topic.clone();
            let recorded = self.rt.block_on(
                self.writer
                    .recorded_offsets(&topic, left(until).min(OVERLAP_READ_DEADLINE)),
            )?;
            let skip: HashMap<i32, i64> = want
                .ranges
                .iter()
                .filter_map(|r| {
                    let done = recorded.iter().find(|x| x.partition == r.partition)?;
                    (done.last >= r.first).then_some((r.partition, done.last))
                })
                .collect();
            if skip.is_empty() {
                anyhow::bail!(
                    "flush {} was refused as overlapping recorded offsets, but the lake's offsets ({recorded:?}) do not reach into it",
                    want.flush_id
                );
            }
            let (full, rest) = self.rebuild(want, &skip, until)?;
            let left_out = (full.descriptor.expected_rows + record_letters(&full.descriptor))
                .saturating_sub(rest.descriptor.expected_rows + record_letters(&rest.descriptor));
            tracing::warn!(flush_id = %want.flush_id, recorded = ?skip, left_out, remaining_rows = rest.descriptor.expected_rows,
                "another owner already recorded part of this flush (a handover); sending only the rest");
            if rest.descriptor.ranges.is_empty() {
                return Ok(left_out);
            }
            let sent = self.rt.block_on(self.writer.send(
                &rest.descriptor,
                rest.schema,
                &rest.batches,
                left(until),
            ));
            match sent {
                // The rest too, exactly (its ranges were another owner's last).
                Ok(ack)
                    if ack.flush_id == rest.descriptor.flush_id
                        && ack.recorded_by_another_flush =>
                {
                    return Ok(left_out
                        + rest.descriptor.expected_rows
                        + record_letters(&rest.descriptor))
                }
                Ok(ack) if ack.flush_id == rest.descriptor.flush_id => return Ok(left_out),
                Ok(ack) => anyhow::bail!(
                    "the writer acknowledged flush {:?} while {} was sent; not committing",
                    ack.flush_id,
                    rest.descriptor.flush_id
                ),
                // Recorded further meanwhile: read the offsets again.
                Err(e) if is_overlap(&e) && Instant::now() < until => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Counts what the buffer did with one consumed batch.
    fn count(&self, added: &Added) {
        if added.tombstones > 0 {
            self.metrics.tombstones.inc_by(added.tombstones as u64);
        }
        for reason in &added.dead_letters {
            // The converter's reasons are what the original counted as a
            // JSON parse skip; an oversized record has its own label.
            let label = if *reason == dead_letter_reason::OVERSIZED_RECORD {
                dead_letter_reason::OVERSIZED_RECORD
            } else {
                skip_reason::JSON_PARSE
            };
            self.metrics
                .records_skipped
                .with_label_values(&[label])
                .inc();
            tracing::debug!(reason, "record is not a row: dead letter");
        }
        for (reason, n) in &added.filtered {
            self.metrics
                .records_skipped
                .with_label_values(&[reason])
                .inc_by(*n as u64);
        }
        for (target, clean) in &added.coerced {
            if *clean {
                self.metrics
                    .columns_coerced
                    .with_label_values(&[target])
                    .inc();
            } else {
                self.metrics
                    .errors
                    .with_label_values(&[error_type::COLUMN_COERCION])
                    .inc();
            }
        }
        if added.invalid_values > 0 {
            self.metrics
                .errors
                .with_label_values(&[error_type::FILTER_VALUE_INVALID])
                .inc_by(added.invalid_values as u64);
        }
        for (value, n) in &added.matched {
            self.metrics.filter_matched.inc_by(value, *n as u64);
        }
    }

    fn flush(&mut self, trigger: FlushTrigger) -> anyhow::Result<()> {
        self.window = Instant::now();
        if self.stages.is_empty() {
            return Ok(());
        }
        let rows = self.stages.rows();
        let flush_id = self
            .flush_id
            .take()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
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
        let Cut {
            descriptor: desc,
            schema,
            batches,
            bytes,
            records,
            rows_digest,
        } = staged.cut;
        let flush_id = desc.flush_id.clone();
        let ranges = desc.ranges.clone();
        let dead_letters = desc.dead_letters.len();
        let started = Instant::now();
        // One deadline for the whole delivery, counted from the last poll so
        // a stalled stream before the cut does not add to it: the stream's
        // end, a re-read and the resend all fit (below the liveness budget).
        let until = self.polled + self.cfg.send_deadline;
        let broken = std::mem::take(&mut self.broken);
        let mut whole = match (std::mem::take(&mut self.held), self.stages.streams()) {
            (true, _) => Some(whole_reason::WRITER_UNREACHABLE),
            (false, false) if rows > 0 => Some(whole_reason::SORT),
            _ => None,
        };
        // The ack of the stream or of the flush sent whole; Ok(None): the
        // stream broke and the flush is read again from Kafka.
        let sent: Result<Option<FlushAck>, SendError> = match self.stream.take() {
            // The stream's end may take two thirds; the rest stays for a
            // re-read and resend if no ack comes.
            Some(stream) => match self.rt.block_on(stream.finish(&desc, left(until) * 2 / 3)) {
                Ok(ack) => Ok(Some(ack)),
                Err(e @ (SendError::Permanent { .. } | SendError::Stopped(_))) => Err(e),
                Err(e) => {
                    self.metrics
                        .errors
                        .with_label_values(&[error_type::FLIGHT])
                        .inc();
                    self.writer.reset();
                    tracing::warn!(error = %e, flush_id = %flush_id,
                        "no acknowledgement for the streamed flush; reading it again from Kafka");
                    Ok(None)
                }
            },
            None if broken => Ok(None),
            None => self
                .rt
                .block_on(self.writer.send(&desc, schema, &batches, left(until)))
                .map(Some),
        };
        // Only the counts are needed from here on, not the dead letters.
        let want = Rebuild::of(&desc, records, rows_digest);
        drop(desc);
        let sent = match sent {
            Ok(None) => {
                whole = Some(whole_reason::REREAD);
                match self.resend_from_kafka(&want, until) {
                    Ok(ack) => Ok(Some(ack)),
                    Err(Resend::Send(e)) => Err(e),
                    Err(Resend::Rebuild(e)) => return Err(e),
                }
            }
            other => other,
        };
        let ack = match sent {
            Ok(Some(ack)) => Some(ack),
            Ok(None) => unreachable!("a flush read again is acknowledged or fails"),
            Err(e) if is_overlap(&e) => {
                whole = Some(whole_reason::REREAD);
                let left_out = self.send_unrecorded(&want, until)?;
                self.metrics
                    .records_skipped
                    .with_label_values(&[skip_reason::ALREADY_RECORDED])
                    .inc_by(left_out);
                None
            }
            Err(e) => return Err(e.into()),
        };
        drop(batches);
        if ack.as_ref().is_some_and(|a| a.recorded_by_another_flush) {
            // Another owner wrote the very same ranges (a handover).
            self.metrics
                .records_skipped
                .with_label_values(&[skip_reason::ALREADY_RECORDED])
                .inc_by(want.rows + want.record_dead_letters as u64);
        }
        if let Some(ack) = ack.as_ref().filter(|a| a.flush_id != flush_id) {
            anyhow::bail!(
                "the writer acknowledged flush {:?} while {} was sent; not committing",
                ack.flush_id,
                flush_id
            );
        }
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

    use millpond_proto::DeadLetter;

    /// A rebuilt flush with its record dead letters at other offsets, or
    /// for another reason, is another flush, though the counts agree.
    #[test]
    fn a_rebuild_compares_which_records_are_dead_letters() {
        let desc = |offset: i64, reason: &str| FlushDescriptor {
            flush_id: "f".into(),
            dead_letters: vec![DeadLetter {
                partition: 0,
                offset,
                reason: reason.into(),
                ..DeadLetter::default()
            }],
            ..FlushDescriptor::default()
        };
        let of = |offset, reason| Rebuild::of(&desc(offset, reason), 2, 7);
        assert_eq!(of(1, "invalid_json"), of(1, "invalid_json"));
        assert_ne!(of(1, "invalid_json"), of(0, "invalid_json"));
        assert_ne!(of(1, "invalid_json"), of(1, "not_an_object"));
        assert_ne!(
            of(1, "invalid_json"),
            Rebuild::of(&desc(1, "invalid_json"), 2, 8)
        );
    }

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
