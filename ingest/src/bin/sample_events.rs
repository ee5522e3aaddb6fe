//! Produces PostHog-like sample events (~1.3 KB of JSON each) to any broker.
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "millpond-sample-events",
    about = "Produce PostHog-like sample events (~1.3 KB of JSON each), keyed by distinct_id"
)]
struct Args {
    /// Kafka bootstrap address, host:port.
    #[arg(long)]
    bootstrap: String,
    #[arg(long, default_value = "events")]
    topic: String,
    /// How many events.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Number of the first event (events are deterministic by number).
    #[arg(long, default_value_t = 0)]
    start: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    millpond_ingest::sample::produce(&args.bootstrap, &args.topic, args.start, args.count)?;
    eprintln!("produced {} events to {}", args.count, args.topic);
    Ok(())
}
