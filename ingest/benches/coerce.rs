//! Column coercion per value: a 27k-row uuid column and a timestamp column
//! from their text (the original: ~0.44 us per uuid value), and the
//! allowlist filter on a 27k-row team_id column.
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use millpond_ingest::stages::coerce::{Coercion, PinType};
use millpond_ingest::stages::filter::{Filter, Filters, Values};

const ROWS: usize = 27_000;

fn bench(c: &mut Criterion) {
    let uuids: Vec<String> = (0..ROWS as u128)
        .map(|i| {
            let h = format!(
                "{:032x}",
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
            );
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        })
        .collect();
    let stamps: Vec<String> = (0..ROWS)
        .map(|i| {
            format!(
                "2026-11-29 12:{:02}:{:02}.{:06}",
                i / 60 % 60,
                i % 60,
                i % 1_000_000
            )
        })
        .collect();
    let batch = RecordBatch::try_from_iter([
        (
            "uuid",
            Arc::new(StringArray::from_iter_values(&uuids)) as ArrayRef,
        ),
        (
            "timestamp",
            Arc::new(StringArray::from_iter_values(&stamps)) as ArrayRef,
        ),
        (
            "team_id",
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS as i64).map(|i| i % 100),
            )),
        ),
    ])
    .unwrap();
    let pin = |col: &str, t: PinType| Coercion {
        pins: vec![(col.to_owned(), t)],
    };
    let mut group = c.benchmark_group("stages_27k");
    group.throughput(Throughput::Elements(ROWS as u64));
    for (name, coercion) in [
        ("coerce_uuid", pin("uuid", PinType::Uuid)),
        ("coerce_timestamptz", pin("timestamp", PinType::Timestamptz)),
    ] {
        let out = coercion.apply(&batch);
        assert!(out.nulled.is_empty(), "{name}: every value converts");
        group.bench_function(name, |b| b.iter(|| coercion.apply(black_box(&batch))));
    }
    let mut filters = Filters::new(
        Some(Filter {
            field: "team_id".into(),
            values: Values::Int((0..50).collect()),
        }),
        None,
    );
    group.bench_function("filter_keep_team_id", |b| {
        b.iter(|| filters.decide(black_box(&batch)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
