//! Produces PostHog-like sample events (~1.3 KB of JSON each) to any broker.
//!
//!   millpond-sample-events --bootstrap 127.0.0.1:9092 --topic events --count 50000 [--start 0]
use anyhow::Context;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let bootstrap = arg(&args, "--bootstrap").context("--bootstrap is required")?;
    let topic = arg(&args, "--topic").unwrap_or_else(|| "events".into());
    let count: u64 = arg(&args, "--count")
        .unwrap_or_else(|| "10000".into())
        .parse()?;
    let start: u64 = arg(&args, "--start")
        .unwrap_or_else(|| "0".into())
        .parse()?;
    millpond_ingest::sample::produce(&bootstrap, &topic, start, count)?;
    eprintln!("produced {count} events to {topic}");
    Ok(())
}
