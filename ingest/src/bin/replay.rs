//! Re-sends data to a Millpond writer, for debugging and manual replays.
//!
//!   millpond-replay --writer 127.0.0.1:50051 --topic events --partition 0 \
//!       --kafka 127.0.0.1:9092 --from 100 --to 199
//!   millpond-replay --writer 127.0.0.1:50051 --topic events.replayed \
//!       --partition 0 --jsonl fixed.jsonl --from 0
//!
//! Kafka mode reads exactly offsets [from, to] of one partition. File mode
//! treats line i as offset from + i. Either way the flush carries that range,
//! so a writer whose lake already recorded it acknowledges without writing.
//! A range must start at the partition's next offset unless `--allow-gap`,
//! and a file goes under a topic no pipeline records unless
//! `--into-pipeline-topic` (the rules: `millpond_ingest::replay`).
use std::process::ExitCode;

use clap::{ArgGroup, Parser};
use millpond_ingest::replay::{self, Outcome, Request, Source};

/// The exit status when the writer wrote nothing: the lake had already
/// recorded this very range (a resend).
const ALREADY_RECORDED: u8 = 3;

/// Re-send one partition's records to a Millpond writer as one flush.
#[derive(Parser)]
#[command(
    name = "millpond-replay",
    group(ArgGroup::new("source").required(true).args(["kafka", "jsonl"])),
    after_help = "Exit status: 0 written; 3 nothing written, the lake had already recorded this \
                  exact range; 1 any other failure (a range that would leave a gap, a file into a \
                  pipeline's topic, a refusal by the writer); 2 bad arguments."
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
    /// Read one payload per line from this file instead. The lines are
    /// recorded under --topic, which must not be a topic whose offsets the
    /// lake records from Kafka (a pipeline's).
    #[arg(long, value_name = "FILE")]
    jsonl: Option<String>,
    /// Flush id (default: replay-<uuid>); reuse one to test resends.
    #[arg(long)]
    flush_id: Option<String>,
    /// Record a range that starts above the partition's next offset: the
    /// offsets in between are never recorded (they are named on stderr).
    #[arg(long)]
    allow_gap: bool,
    /// Record a file's lines under a topic whose offsets the lake records
    /// from Kafka. Only for a topic no pipeline consumes any more: a
    /// pipeline that meets these offsets stops rather than skip its records.
    #[arg(long, requires = "jsonl")]
    into_pipeline_topic: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let source = match (args.kafka, args.jsonl, args.to) {
        (Some(bootstrap), None, Some(to)) => Source::Kafka { bootstrap, to },
        (None, Some(path), _) => Source::Jsonl(path),
        _ => {
            eprintln!("millpond-replay: give exactly one of --kafka BOOTSTRAP (with --to) or --jsonl FILE");
            return ExitCode::from(2);
        }
    };
    let request = Request {
        writer: args.writer,
        topic: args.topic,
        partition: args.partition,
        from: args.from,
        source,
        flush_id: args.flush_id,
        allow_gap: args.allow_gap,
        into_pipeline_topic: args.into_pipeline_topic,
    };
    match replay::run(request, &mut |note| eprintln!("{note}")) {
        Ok(Outcome::Written(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(Outcome::AlreadyRecorded(line)) => {
            println!("{line} (exit status {ALREADY_RECORDED})");
            ExitCode::from(ALREADY_RECORDED)
        }
        // One line with its causes, whatever RUST_BACKTRACE says.
        Err(e) => {
            eprintln!("millpond-replay: {e:#}");
            ExitCode::FAILURE
        }
    }
}
