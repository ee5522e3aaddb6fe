//! The pre-write sort on a flush the size the original's figure is quoted
//! for: 30k rows, ~256 MB of Arrow (PostHog-like events with ~8 KB of
//! properties each), sorted by team_id, timestamp. The original: 50-200 ms,
//! with peak memory doubling.
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use millpond_ingest::kafka::Record;
use millpond_ingest::stages::{StageConfig, Stages};
use millpond_proto::FlushTrigger;

const ROWS: usize = 30_000;

fn flush_events() -> Vec<String> {
    let pad = "x".repeat(8000);
    (0..ROWS as u64)
        .map(|i| {
            let mut e = millpond_ingest::sample::event(i * 7919 % 100_000);
            e.pop(); // '}'
            e.push_str(&format!(r#","blob":"{pad}"}}"#));
            e
        })
        .collect()
}

fn rss_kb(field: &str) -> Option<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Resets the process's peak RSS (Linux: `5` to /proc/self/clear_refs).
fn reset_peak() -> bool {
    use std::io::Write;
    let r = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/clear_refs")
        .and_then(|mut f| f.write_all(b"5"));
    if let Err(e) = &r {
        eprintln!("sort bench: cannot reset the peak RSS ({e}); peak not measured");
    }
    r.is_ok()
}

fn bench_sort(c: &mut Criterion) {
    let events = flush_events();
    let records: Vec<Record<'_>> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Record {
            partition: 0,
            offset: i as i64,
            timestamp_ms: None,
            key: None,
            payload: Some(e.as_bytes()),
        })
        .collect();
    let cfg = |sort: &[&str]| StageConfig {
        sort_by: sort.iter().map(|s| s.to_string()).collect(),
        ..StageConfig::default()
    };
    let staged = |cfg: &StageConfig| {
        let mut s = Stages::new(cfg);
        for chunk in records.chunks(1000) {
            s.process("events", chunk);
        }
        s
    };
    let probe = staged(&cfg(&[]))
        .cut("events", FlushTrigger::Size, "f".into())
        .unwrap();
    let bytes: usize = probe
        .cut
        .batches
        .iter()
        .map(|b| b.get_array_memory_size())
        .sum();
    eprintln!("sort bench: {ROWS} rows, {} MB of Arrow", bytes >> 20);
    drop(probe);
    // Peak memory of one sorted cut, over the memory the unsorted flush holds.
    let keys = cfg(&["team_id", "timestamp"]);
    let s = staged(&keys);
    if let (Some(before), true) = (rss_kb("VmRSS"), reset_peak()) {
        let sorted = { s }.cut("events", FlushTrigger::Size, "f".into()).unwrap();
        if let Some(peak) = rss_kb("VmHWM") {
            eprintln!(
                "sort bench: peak memory during the sorted cut: +{} MB over the {} MB flush held before it",
                peak.saturating_sub(before) >> 10,
                bytes >> 20
            );
        }
        drop(sorted);
    }

    let mut group = c.benchmark_group("sort");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes as u64));
    // The cut alone (unify, no sort), then the cut with the sort: the
    // difference is the sort's cost.
    for (name, keys) in [
        ("cut_unsorted_30k", vec![]),
        (
            "cut_sorted_team_id_timestamp_30k",
            vec!["team_id", "timestamp"],
        ),
    ] {
        let c = cfg(&keys);
        group.bench_function(name, |b| {
            b.iter_batched(
                || staged(&c),
                |mut s| s.cut("events", FlushTrigger::Size, "f".into()).unwrap(),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_sort);
criterion_main!(benches);
