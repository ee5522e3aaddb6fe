//! A Kafka-protocol broker for local runs, benchmarks and tests: librdkafka's
//! mock cluster in its own process. Prints `BOOTSTRAP=<host:port>` once
//! ready (after producing what it was asked to), then serves until
//! SIGTERM/SIGINT.
use clap::Parser;
use rdkafka::mocking::MockCluster;

#[derive(Parser)]
#[command(
    name = "millpond-mock-broker",
    about = "librdkafka's mock Kafka cluster, preloaded"
)]
struct Args {
    #[arg(long, default_value = "events")]
    topic: String,
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Produce this many PostHog-like sample events first.
    #[arg(long, default_value_t = 0)]
    sample_events: u64,
    /// Produce each line of this file as one message first.
    #[arg(long, value_name = "FILE")]
    jsonl: Option<String>,
    #[arg(long, default_value_t = 1)]
    brokers: i32,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cluster = MockCluster::new(args.brokers)?;
    cluster.create_topic(&args.topic, args.partitions, 1)?;
    let bootstrap = cluster.bootstrap_servers();
    if args.sample_events > 0 {
        millpond_ingest::sample::produce(&bootstrap, &args.topic, 0, args.sample_events)?;
    }
    if let Some(path) = &args.jsonl {
        let lines = std::fs::read(path).map_err(|e| anyhow::anyhow!("read {path}: {e}"))?;
        millpond_ingest::sample::produce_lines(&bootstrap, &args.topic, &lines)?;
    }
    println!("BOOTSTRAP={bootstrap}");
    eprintln!(
        "mock broker ready: topic {} with {} partitions",
        args.topic, args.partitions
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(millpond_shared::shutdown::signal());
    drop(cluster);
    Ok(())
}
