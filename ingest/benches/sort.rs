//! The pre-write sort on a flush the size the original's figure is quoted
//! for: 30k rows, ~256 MB of Arrow (PostHog-like events with ~8 KB of
//! properties each), sorted by team_id, timestamp. The original: 50-200 ms,
//! with peak memory doubling.
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use millpond_ingest::buffer::Record;
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
