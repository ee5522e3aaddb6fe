//! A Kafka-protocol broker for local runs and tests: librdkafka's mock
//! cluster in its own process. Prints `BOOTSTRAP=<host:port>` once ready,
//! optionally produces sample events, then serves until SIGTERM/SIGINT.
//!
//! usage: millpond-mock-broker [--topic events] [--partitions 4]
//!        [--sample-events N] [--brokers 1]
use rdkafka::mocking::MockCluster;

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.windows(2)
        .find(|w| w[0] == name)
        .map(|w| w[1].clone())
        .unwrap_or_else(|| default.to_owned())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let topic = arg(&args, "--topic", "events");
    let partitions: i32 = arg(&args, "--partitions", "4").parse()?;
    let samples: u64 = arg(&args, "--sample-events", "0").parse()?;
    let brokers: i32 = arg(&args, "--brokers", "1").parse()?;
    let cluster = MockCluster::new(brokers)?;
    cluster.create_topic(&topic, partitions, 1)?;
    let bootstrap = cluster.bootstrap_servers();
    if samples > 0 {
        millpond_ingest::sample::produce(&bootstrap, &topic, 0, samples)?;
    }
    println!("BOOTSTRAP={bootstrap}");
    eprintln!(
        "mock broker ready: topic {topic} with {partitions} partitions, {samples} sample events"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(millpond_shared::shutdown::signal());
    drop(cluster);
    Ok(())
}
