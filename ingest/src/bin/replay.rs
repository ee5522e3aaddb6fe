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
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{ArgGroup, Parser};
use millpond_ingest::buffer::Record;
use millpond_ingest::flight::WriterClient;
use millpond_ingest::stages::{StageConfig, Stages};
use millpond_proto::FlushTrigger;
use millpond_shared::config::{Env, EnvReader};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// Re-send one partition's records to a Millpond writer as one flush.
#[derive(Parser)]
#[command(name = "millpond-replay", group(ArgGroup::new("source").required(true).args(["kafka", "jsonl"])))]
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
    /// First offset (file mode: the offset of the first line).
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
}

fn read_kafka(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    from: i64,
    to: i64,
) -> anyhow::Result<Vec<(i64, Option<Vec<u8>>)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "millpond-replay")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(from))?;
    consumer.assign(&tpl)?;
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while out.last().map(|(o, _)| *o).unwrap_or(from - 1) < to {
        if std::time::Instant::now() > deadline {
            bail!(
                "timed out reading offsets {from}..={to}; got {} records",
                out.len()
            );
        }
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) if m.offset() <= to => {
                out.push((m.offset(), m.payload().map(<[u8]>::to_vec)))
            }
            Some(Ok(_)) => break,
            Some(Err(e)) => bail!("kafka: {e}"),
            None => {}
        }
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (topic, partition, from) = (args.topic, args.partition, args.from);
    let records = match (&args.kafka, &args.jsonl, args.to) {
        (Some(bootstrap), None, Some(to)) => read_kafka(bootstrap, &topic, partition, from, to)?,
        (None, Some(path), _) => std::fs::read_to_string(path)
            .with_context(|| format!("read {path}"))?
            .lines()
            .enumerate()
            .map(|(i, l)| (from + i as i64, Some(l.as_bytes().to_vec())))
            .collect(),
        _ => bail!("give exactly one of --kafka BOOTSTRAP (with --to) or --jsonl FILE"),
    };
    if records.is_empty() {
        bail!("nothing to replay");
    }
    // The same stages as the pipeline, from the same variables.
    let env = Env::from_process();
    let mut reader = EnvReader::new(&env);
    let stage_cfg = StageConfig::from_env(&mut reader);
    reader.finish()?;
    let mut stages = Stages::new(&stage_cfg);
    let batch: Vec<Record<'_>> = records
        .iter()
        .map(|(offset, payload)| Record {
            partition,
            offset: *offset,
            timestamp_ms: None,
            key: None,
            payload: payload.as_deref(),
        })
        .collect();
    let added = stages.process(&topic, &batch);
    let flush_id = args
        .flush_id
        .unwrap_or_else(|| format!("replay-{}", uuid::Uuid::new_v4()));
    let staged = stages.cut(&topic, FlushTrigger::Unspecified, flush_id)?;
    if let Some((why, _)) = &staged.sort_skipped {
        eprintln!(
            "MILLPOND_SORT_BY: sent unsorted ({}: {:?})",
            why.reason, why.keys
        );
    }
    let cut = staged.cut;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut client = WriterClient::new(args.writer);
    let ack = rt.block_on(client.send(
        &cut.descriptor,
        cut.schema,
        &cut.batches,
        Duration::from_secs(60),
    ))?;
    // Filtered records are neither rows nor dead letters: say so, since a
    // replay with the pipeline's filters may drop the records it was for.
    let filtered: usize = added.filtered.iter().map(|(_, n)| n).sum();
    let reasons: Vec<String> = added
        .filtered
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    println!(
        "flush {} ({} records, {} not JSON objects, {} tombstones, {} filtered{}): {:?}, {} rows and {} dead letters written to {}",
        ack.flush_id,
        records.len(),
        added.dead_letters.len(),
        added.tombstones,
        filtered,
        if reasons.is_empty() { String::new() } else { format!(": {}", reasons.join(", ")) },
        ack.outcome(),
        ack.rows_written,
        ack.dead_letters_written,
        ack.table
    );
    Ok(())
}
