//! Re-sends data to a Millpond writer, for debugging and manual replays.
//!
//!   millpond-replay --writer 127.0.0.1:50051 --topic events --partition 0 \
//!       --kafka 127.0.0.1:9092 --from 100 --to 199
//!   millpond-replay --writer 127.0.0.1:50051 --topic events --partition 0 \
//!       --jsonl events.jsonl --from 100
//!
//! Kafka mode reads exactly offsets [from, to] of one partition. File mode
//! treats line i as offset from + i. Either way the flush carries that range,
//! so a writer whose lake already recorded it acknowledges without writing.
//! A range must start at the partition's next offset (see
//! `millpond_ingest::replay`) unless `--allow-gap`.
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{ArgGroup, Parser};
use millpond_ingest::flight::WriterClient;
use millpond_ingest::kafka::Record;
use millpond_ingest::replay::{KafkaPartition, Owned, Position, Start};
use millpond_ingest::stages::{StageConfig, Stages};
use millpond_proto::{AckOutcome, FlushTrigger, OffsetRange};
use millpond_shared::config::{Env, EnvReader};

/// How long the writer and Kafka are given for each step.
const DEADLINE: Duration = Duration::from_secs(60);

/// The exit status when the writer wrote nothing: the lake had already
/// recorded this very range (a resend).
const ALREADY_RECORDED: u8 = 3;

/// Re-send one partition's records to a Millpond writer as one flush.
#[derive(Parser)]
#[command(
    name = "millpond-replay",
    group(ArgGroup::new("source").required(true).args(["kafka", "jsonl"])),
    after_help = "Exit status: 0 written; 3 nothing written, the lake had already recorded this \
                  exact range; 1 any other failure (a range that would leave a gap, a refusal by \
                  the writer); 2 bad arguments."
)]
struct Args {
    /// The writer's Flight address.
    #[arg(long, default_value = millpond_proto::DEFAULT_WRITER_ADDR)]
    writer: String,
    /// Topic the flush's offset range is recorded under.
    #[arg(long)]
    topic: String,
    /// Partition the flush's offset range is recorded under.
    #[arg(long)]
    partition: i32,
    /// First offset (file mode: the offset of the first line). It must be
    /// the partition's next offset: one past what the lake recorded, or 0
    /// (Kafka mode: the log start) when it recorded nothing.
    #[arg(long)]
    from: i64,
    /// Last offset, inclusive (Kafka mode).
    #[arg(long, requires = "kafka")]
    to: Option<i64>,
    /// Read offsets [from, to] from this Kafka bootstrap address.
    #[arg(long, value_name = "BOOTSTRAP", requires = "to")]
    kafka: Option<String>,
    /// Read one payload per line from this file instead.
    #[arg(long, value_name = "FILE")]
    jsonl: Option<String>,
    /// Flush id (default: replay-<uuid>); reuse one to test resends.
    #[arg(long)]
    flush_id: Option<String>,
    /// Record a range that starts above the partition's next offset: the
    /// offsets in between are never recorded (they are named on stderr).
    #[arg(long)]
    allow_gap: bool,
}

fn main() -> ExitCode {
    match replay(Args::parse()) {
        Ok(code) => code,
        // One line with its causes, whatever RUST_BACKTRACE says.
        Err(e) => {
            eprintln!("millpond-replay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn replay(args: Args) -> anyhow::Result<ExitCode> {
    let (topic, partition, from) = (args.topic.as_str(), args.partition, args.from);
    if from < 0 {
        bail!("--from {from}: an offset is 0 or more");
    }
    if let Some(to) = args.to.filter(|&to| to < from) {
        bail!("--to {to} is below --from {from}");
    }
    // The same stages as the pipeline, from the same variables.
    let env = Env::from_process();
    let mut reader = EnvReader::new(&env);
    let stage_cfg = StageConfig::from_env(&mut reader);
    // The pipeline's topic epoch: its offsets are recorded under it.
    let epoch = reader.optional("MILLPOND_TOPIC_EPOCH");
    if let Some(why) = epoch.as_deref().and_then(millpond_ingest::epoch::invalid) {
        reader.errors.push("MILLPOND_TOPIC_EPOCH", why);
    }
    reader.finish()?;

    let kafka = match &args.kafka {
        Some(bootstrap) => Some(KafkaPartition::open(bootstrap, topic, partition, DEADLINE)?),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut client = WriterClient::new(args.writer).recording(
        millpond_ingest::epoch::LakeTopic::new(topic, epoch.as_deref()),
    );
    let recorded = rt
        .block_on(client.recorded_offsets(topic, DEADLINE))
        .context("asking the writer which offsets the lake recorded")?;
    let position = Position::of(&recorded, topic, partition, kafka.as_ref().map(|k| k.low));
    if let Start::Gap(skipped) = position.start(from) {
        let (first, last) = (skipped.start(), skipped.end());
        if !args.allow_gap {
            bail!(
                "refusing to replay {topic} partition {partition} from offset {from}: {}, so offsets \
                 {first}..={last} would never be recorded (the writer refuses a range below recorded \
                 offsets, and ingest resumes after them). Start at --from {first}, or pass \
                 --allow-gap to skip them for good.",
                position.describe()
            );
        }
        eprintln!(
            "--allow-gap: skipping offsets {first}..={last} of {topic} partition {partition} ({}); \
             they will never be recorded",
            position.describe()
        );
    }

    let records: Vec<Owned> = match (&kafka, &args.jsonl, args.to) {
        (Some(k), None, Some(to)) => k.read(from, to, DEADLINE)?,
        (None, Some(path), _) => std::fs::read_to_string(path)
            .with_context(|| format!("read {path}"))?
            .lines()
            .enumerate()
            .map(|(i, l)| Owned {
                partition,
                offset: from + i as i64,
                timestamp_ms: None,
                key: None,
                payload: Some(l.as_bytes().to_vec()),
            })
            .collect(),
        _ => bail!("give exactly one of --kafka BOOTSTRAP (with --to) or --jsonl FILE"),
    };
    if records.is_empty() {
        bail!("nothing to replay");
    }
    let mut stages = Stages::new(&stage_cfg);
    let batch: Vec<Record<'_>> = records.iter().map(Owned::record).collect();
    let added = stages.process(topic, &batch);
    let flush_id = args
        .flush_id
        .unwrap_or_else(|| format!("replay-{}", uuid::Uuid::new_v4()));
    let staged = stages.cut(topic, FlushTrigger::Unspecified, flush_id)?;
    if let Some((why, _)) = &staged.sort_skipped {
        eprintln!(
            "MILLPOND_SORT_BY: sent unsorted ({}: {:?})",
            why.reason, why.keys
        );
    }
    let mut cut = staged.cut;
    if args.jsonl.is_some() {
        // A file's lines are not the records Kafka holds at these offsets.
        for r in &mut cut.descriptor.ranges {
            *r = OffsetRange::new(&r.topic, r.partition, r.first, r.last);
        }
    }
    let ack = rt.block_on(client.send(&cut.descriptor, cut.schema, &cut.batches, DEADLINE))?;
    // Filtered records are neither rows nor dead letters: say so, since a
    // replay with the pipeline's filters may drop the records it was for.
    let filtered: usize = added.filtered.iter().map(|(_, n)| n).sum();
    let reasons: Vec<String> = added
        .filtered
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    let summary = format!(
        "flush {} ({} records, {} not JSON objects, {} tombstones, {} filtered{})",
        ack.flush_id,
        records.len(),
        added.dead_letters.len(),
        added.tombstones,
        filtered,
        if reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", reasons.join(", "))
        },
    );
    if ack.outcome() == AckOutcome::AlreadyRecorded {
        let ranges: Vec<String> = cut
            .descriptor
            .ranges
            .iter()
            .map(|r| {
                format!(
                    "{} partition {} offsets {}..={}",
                    r.topic, r.partition, r.first, r.last
                )
            })
            .collect();
        println!(
            "{summary}: AlreadyRecorded, nothing written: the lake had already recorded exactly {} \
             (exit status {ALREADY_RECORDED})",
            ranges.join(", ")
        );
        return Ok(ExitCode::from(ALREADY_RECORDED));
    }
    println!(
        "{summary}: {:?}, {} rows and {} dead letters written to {}",
        ack.outcome(),
        ack.rows_written,
        ack.dead_letters_written,
        ack.table
    );
    Ok(ExitCode::SUCCESS)
}
