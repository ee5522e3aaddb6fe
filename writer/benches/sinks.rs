//! The same flush into whichever sink the writer's own settings configure
//! (MILLPOND_DESTINATION, DUCKLAKE_*, HOGLAKE_*), called in this process as
//! the writer calls it: rows/s, CPU-seconds per flush (user + sys over every
//! thread of this process: encoding, DuckDB, uploads) and the peak RSS while
//! the sink runs (the peak is reset once the flush is built). The servers
//! it talks to (catalog, S3) are other processes and not counted.
//! scripts/bench-hoglake.sh runs it once per destination, each in its own
//! process so every peak RSS is its own, and prints them side by side.
//!
//! BENCH_ROWS (default 100000) rows per flush; BENCH_FLUSHES (default 5)
//! timed flushes after one untimed flush that creates the table;
//! BENCH_LABEL names the result line. BENCH_STREAMED=1 hands each flush
//! over as the Flight server hands a streamed one: batch by batch, when the
//! sink takes them (`Sink::stream_begin`), whole otherwise.
use std::time::{Duration, Instant};

use millpond_proto::{FlushTrigger, OffsetRange};
use millpond_shared::config::Env;
use millpond_shared::metrics::{new_registry, WriterMetrics};
use millpond_writer::config::WriterConfig;
use millpond_writer::sink::{factory, Flush};
use procfs::process::{ClearRefs, Process};

mod sample_flush;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is no count"))
        })
        .unwrap_or(default)
}

/// CPU-seconds (user + sys) this process has used so far.
fn cpu_seconds() -> f64 {
    let stat = Process::myself()
        .and_then(|p| p.stat())
        .expect("/proc/self/stat");
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
}

/// (resident now, peak resident) in MB.
fn rss_mb() -> (f64, f64) {
    let status = Process::myself()
        .and_then(|p| p.status())
        .expect("/proc/self/status");
    let mb = |kb: Option<u64>| kb.unwrap_or(0) as f64 / 1024.0;
    (mb(status.vmrss), mb(status.vmhwm))
}

fn main() {
    let rows = env_u64("BENCH_ROWS", 100_000);
    let flushes = env_u64("BENCH_FLUSHES", 5).max(1);
    let label = std::env::var("BENCH_LABEL").unwrap_or_else(|_| "sink".into());
    let streamed = std::env::var("BENCH_STREAMED").is_ok_and(|v| v == "1");
    let cfg = WriterConfig::from_env(&Env::from_process()).unwrap_or_else(|e| panic!("{e}"));
    let batches = sample_flush::batches(rows);
    let schema = batches[0].schema();
    let arrow_mb = batches
        .iter()
        .map(|b| b.get_array_memory_size())
        .sum::<usize>() as f64
        / 1e6;
    if let Err(e) = Process::myself().and_then(|p| p.clear_refs(ClearRefs::PeakRSS)) {
        eprintln!("{label}: cannot reset the peak RSS ({e}); it includes building the flush");
    }
    let (base_rss, _) = rss_mb();

    // As the writer runs it: a 2-thread runtime; the sink is called off it.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let metrics = WriterMetrics::new(&new_registry("bench", ""));
    let mut sink = rt
        .block_on(factory::connect(&cfg.sink, metrics))
        .unwrap_or_else(|e| panic!("{label}: connecting the sink: {e:#}"));
    let mut wall = Duration::ZERO;
    let mut cpu = 0.0;
    for i in 0..=flushes {
        let first = (i * rows) as i64;
        let id = format!("bench-{i}");
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let token = if streamed {
            sink.stream_begin(&id)
        } else {
            None
        };
        if let Some(token) = token {
            for b in &batches {
                sink.stream_batch(&id, token, b.clone())
                    .unwrap_or_else(|e| panic!("{label}: flush {i}: {e}"));
            }
        }
        let flush = Flush {
            id,
            trigger: FlushTrigger::Size,
            ranges: vec![OffsetRange::new(
                "events",
                0,
                first,
                first + rows as i64 - 1,
            )],
            schema: schema.clone(),
            batches: if token.is_some() {
                vec![]
            } else {
                batches.clone()
            },
            dead_letters: Default::default(),
            streamed: token,
        };
        let deadline = sink.deadline();
        let receipt = sink
            .write(&flush, deadline)
            .unwrap_or_else(|e| panic!("{label}: flush {i}: {e}"))
            .into_inner();
        let (took, used) = (t0.elapsed(), cpu_seconds() - cpu0);
        assert_eq!(receipt.rows_written, rows, "{label}: flush {i}");
        eprintln!(
            "{label}: flush {i}{}{}: {:.3} s wall, {used:.2} CPU-s",
            if i == 0 { " (creates the table)" } else { "" },
            if token.is_some() { " (streamed)" } else { "" },
            took.as_secs_f64()
        );
        if i > 0 {
            wall += took;
            cpu += used;
        }
    }
    sink.close().unwrap();
    let (_, peak) = rss_mb();
    let n = flushes as f64;
    // One tab-separated line for the script's table.
    println!(
        "RESULT\t{label}\t{rows}\t{flushes}\t{arrow_mb:.0}\t{:.0}\t{:.3}\t{:.3}\t{peak:.0}\t{base_rss:.0}",
        (rows * flushes) as f64 / wall.as_secs_f64(),
        wall.as_secs_f64() / n,
        cpu / n,
    );
}
