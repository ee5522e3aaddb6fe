//! One replay, from its request to the writer's answer: the position
//! checks, the records, the stages, the send.
use std::time::Duration;

use anyhow::{bail, Context};
use millpond_proto::{AckOutcome, FlushAck, FlushTrigger, OffsetRange};
use millpond_shared::config::{Env, EnvReader};

use super::position::{read_from_kafka, Position, Start};
use super::source::{lines, KafkaPartition, Owned};
use crate::epoch::LakeTopic;
use crate::flight::WriterClient;
use crate::kafka::Record;
use crate::stages::{Added, StageConfig, Stages};

/// How long the writer and Kafka are given for each step.
const DEADLINE: Duration = Duration::from_secs(60);

/// Where the replayed records come from.
pub enum Source {
    /// Offsets `from..=to` of the partition, read from this bootstrap.
    Kafka { bootstrap: String, to: i64 },
    /// One payload per line of this file, from offset `from` on.
    Jsonl(String),
}

/// What to replay, and what the operator allowed.
pub struct Request {
    pub writer: String,
    pub topic: String,
    pub partition: i32,
    pub from: i64,
    pub source: Source,
    /// Default: `replay-<uuid>`.
    pub flush_id: Option<String>,
    /// Record a range that starts above the partition's next offset.
    pub allow_gap: bool,
    /// Record a file's lines under a topic whose offsets a pipeline records.
    pub into_pipeline_topic: bool,
}

/// The writer's answer, with the line that says what was sent.
pub enum Outcome {
    Written(String),
    /// The lake had recorded exactly this range: nothing was written.
    AlreadyRecorded(String),
}

/// Replays `req`; `note` receives what the operator should know on the way
/// (a skipped gap, an unsorted flush).
pub fn run(req: Request, note: &mut dyn FnMut(String)) -> anyhow::Result<Outcome> {
    if req.from < 0 {
        bail!("--from {}: an offset is 0 or more", req.from);
    }
    if let Source::Kafka { to, .. } = req.source {
        if to < req.from {
            bail!("--to {to} is below --from {}", req.from);
        }
    }
    let (stage_cfg, epoch) = settings()?;
    let kafka = match &req.source {
        Source::Kafka { bootstrap, .. } => Some(KafkaPartition::open(
            bootstrap,
            &req.topic,
            req.partition,
            DEADLINE,
        )?),
        Source::Jsonl(_) => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut client = WriterClient::new(req.writer.clone())
        .recording(LakeTopic::new(&req.topic, epoch.as_deref()));
    let recorded = rt
        .block_on(client.recorded_offsets(&req.topic, DEADLINE))
        .context("asking the writer which offsets the lake recorded")?;
    check_start(&req, &recorded, kafka.as_ref().map(|k| k.low), note)?;
    if matches!(req.source, Source::Jsonl(_)) {
        check_topic(&req, &recorded)?;
    }

    let records: Vec<Owned> = match (&kafka, &req.source) {
        (Some(k), Source::Kafka { to, .. }) => k.read(req.from, *to, DEADLINE)?,
        (_, Source::Jsonl(path)) => lines(
            &std::fs::read_to_string(path).with_context(|| format!("read {path}"))?,
            req.partition,
            req.from,
        ),
        (None, Source::Kafka { .. }) => unreachable!("opened above"),
    };
    if records.is_empty() {
        bail!("nothing to replay");
    }
    let mut stages = Stages::new(&stage_cfg);
    let batch: Vec<Record<'_>> = records.iter().map(Owned::record).collect();
    let added = stages.process(&req.topic, &batch);
    let flush_id = req
        .flush_id
        .clone()
        .unwrap_or_else(|| format!("replay-{}", uuid::Uuid::new_v4()));
    let staged = stages.cut(&req.topic, FlushTrigger::Unspecified, flush_id)?;
    if let Some((why, _)) = &staged.sort_skipped {
        note(format!(
            "MILLPOND_SORT_BY: sent unsorted ({}: {:?})",
            why.reason, why.keys
        ));
    }
    let mut cut = staged.cut;
    if matches!(req.source, Source::Jsonl(_)) {
        // A file's lines are not the records Kafka holds at these offsets.
        for r in &mut cut.descriptor.ranges {
            *r = OffsetRange::new(&r.topic, r.partition, r.first, r.last);
        }
    }
    let ack = rt.block_on(client.send(&cut.descriptor, cut.schema, &cut.batches, DEADLINE))?;
    Ok(outcome(&ack, records.len(), &added, &cut.descriptor.ranges))
}

/// The pipeline's stages and topic epoch, from the pipeline's variables.
fn settings() -> anyhow::Result<(StageConfig, Option<String>)> {
    let env = Env::from_process();
    let mut reader = EnvReader::new(&env);
    let stage_cfg = StageConfig::from_env(&mut reader);
    // The pipeline's topic epoch: its offsets are recorded under it.
    let epoch = reader.optional("MILLPOND_TOPIC_EPOCH");
    if let Some(why) = epoch.as_deref().and_then(crate::epoch::invalid) {
        reader.errors.push("MILLPOND_TOPIC_EPOCH", why);
    }
    reader.finish()?;
    Ok((stage_cfg, epoch))
}

/// A range must start at the partition's next offset, unless the gap it
/// leaves is allowed.
fn check_start(
    req: &Request,
    recorded: &[OffsetRange],
    log_start: Option<i64>,
    note: &mut dyn FnMut(String),
) -> anyhow::Result<()> {
    let (topic, partition, from) = (&req.topic, req.partition, req.from);
    let position = Position::of(recorded, topic, partition, log_start);
    let Start::Gap(skipped) = position.start(from) else {
        return Ok(());
    };
    let (first, last) = (skipped.start(), skipped.end());
    if !req.allow_gap {
        bail!(
            "refusing to replay {topic} partition {partition} from offset {from}: {}, so offsets \
             {first}..={last} would never be recorded (the writer refuses a range below recorded \
             offsets, and ingest resumes after them). Start at --from {first}, or pass \
             --allow-gap to skip them for good.",
            position.describe()
        );
    }
    note(format!(
        "--allow-gap: skipping offsets {first}..={last} of {topic} partition {partition} ({}); \
         they will never be recorded",
        position.describe()
    ));
    Ok(())
}

/// A file's lines take offsets of their own. Under a pipeline's topic they
/// would take offsets of records Kafka holds or will hold: the pipeline
/// would find those offsets recorded and never write its records. So a file
/// goes under a topic of its own unless the operator says otherwise.
fn check_topic(req: &Request, recorded: &[OffsetRange]) -> anyhow::Result<()> {
    let Some(seen) = read_from_kafka(recorded, &req.topic) else {
        return Ok(());
    };
    if req.into_pipeline_topic {
        return Ok(());
    }
    bail!(
        "refusing to record a file's lines under topic {topic:?}: the lake records that topic's \
         offsets from Kafka's records (partition {p} up to offset {last}), so a pipeline consumes \
         it, and the lines would take the offsets of records Kafka holds or will hold; the \
         pipeline would then stop at those offsets rather than write its own records. Replay under \
         a topic name of its own (for example --topic {topic}.replayed), or pass \
         --into-pipeline-topic if no pipeline consumes {topic:?} any more.",
        topic = req.topic,
        p = seen.partition,
        last = seen.last,
    )
}

/// What the writer did with the flush, in one line.
fn outcome(ack: &FlushAck, records: usize, added: &Added, ranges: &[OffsetRange]) -> Outcome {
    // Filtered records are neither rows nor dead letters: say so, since a
    // replay with the pipeline's filters may drop the records it was for.
    let filtered: usize = added.filtered.iter().map(|(_, n)| n).sum();
    let reasons: Vec<String> = added
        .filtered
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    let summary = format!(
        "flush {} ({records} records, {} not JSON objects, {} tombstones, {filtered} filtered{})",
        ack.flush_id,
        added.dead_letters.len(),
        added.tombstones,
        if reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", reasons.join(", "))
        },
    );
    if ack.outcome() == AckOutcome::AlreadyRecorded {
        let ranges: Vec<String> = ranges
            .iter()
            .map(|r| {
                format!(
                    "{} partition {} offsets {}..={}",
                    r.topic, r.partition, r.first, r.last
                )
            })
            .collect();
        return Outcome::AlreadyRecorded(format!(
            "{summary}: AlreadyRecorded, nothing written: the lake had already recorded exactly {}",
            ranges.join(", ")
        ));
    }
    Outcome::Written(format!(
        "{summary}: {:?}, {} rows and {} dead letters written to {}",
        ack.outcome(),
        ack.rows_written,
        ack.dead_letters_written,
        ack.table
    ))
}
