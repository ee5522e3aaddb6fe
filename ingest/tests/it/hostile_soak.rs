//! A long randomized run through the one path from records to a flush
//! (convert, dead letters, coordinates, column limit, unify): 10^6 payloads
//! with hostile ones mixed in. Ignored by default (about a minute):
//!
//! ```sh
//! cargo test --release -p millpond-ingest --test it -- hostile_soak:: --ignored --nocapture
//! ```
//!
//! `SOAK_PAYLOADS` changes the count. Checks: no panic; every record is a
//! row, a dead letter carrying its own bytes, or a tombstone; every offset
//! is covered; the process's peak RSS stays bounded.
use std::fmt::Write as _;

use arrow::record_batch::RecordBatch;
use millpond_ingest::buffer::{Limits, Pending};
use millpond_ingest::kafka::Record;
use millpond_proto::FlushTrigger;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

const FLUSH_BYTES: usize = 64 << 20;
const BATCH: usize = 1000;

fn normal(rng: &mut StdRng, i: u64) -> Vec<u8> {
    let mut s = format!(
        r#"{{"event":"e{}","distinct_id":"user-{}","n":{i}"#,
        rng.random_range(0..20),
        rng.random_range(0..9000)
    );
    for k in 0..rng.random_range(0..12) {
        let _ = write!(s, r#","p{k}":{}"#, rng.random_range(-1000.0..1000.0f64));
    }
    s.push('}');
    s.into_bytes()
}

fn hostile(rng: &mut StdRng, i: u64) -> Vec<u8> {
    match rng.random_range(0..10) {
        // Deep nesting inside a valid object, and as a whole payload.
        0 => {
            let d = rng.random_range(1..20_000);
            format!(r#"{{"deep":{}1{}}}"#, "[".repeat(d), "]".repeat(d)).into_bytes()
        }
        1 => "[".repeat(rng.random_range(1..50_000)).into_bytes(),
        // Numbers no 64-bit type holds.
        2 => format!(
            r#"{{"big":123456789012345678901234567890{i},"f":1e400,"g":-1e-400,"p":3.14159265358979323846264338327950288}}"#
        )
        .into_bytes(),
        // Invalid UTF-8, raw bytes.
        3 => {
            let mut b = vec![0u8; rng.random_range(0..64)];
            rng.fill_bytes(&mut b);
            b.push(0xff);
            b
        }
        // Duplicate and empty keys, case twins, the reserved namespace.
        4 => format!(r#"{{"a":1,"a":"two","":{i},"A":3,"_millpond_offset":5,"$set":{{"x":1}}}}"#).into_bytes(),
        // Truncated JSON and scalars.
        5 => br#"{"a":[1,2"#.to_vec(),
        6 => b"null".to_vec(),
        // Very wide objects: 100k keys once in a while, 2k otherwise.
        7 => {
            let keys = if rng.random_range(0..50) == 0 { 100_000 } else { 2_000 };
            let mut s = String::from("{");
            for k in 0..keys {
                let _ = write!(s, r#""w{}_{k}":{k},"#, rng.random_range(0..3));
            }
            s.push_str(r#""end":true}"#);
            s.into_bytes()
        }
        // Lone surrogate escapes and control characters.
        8 => br#"{"s":"\ud800","t":"ok"}"#.to_vec(),
        _ => format!(r#"{{"mixed":{}}}"#, if i.is_multiple_of(2) { "\"text\"".to_owned() } else { i.to_string() }).into_bytes(),
    }
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[test]
#[ignore = "long: run with --ignored (see the module docs)"]
fn a_million_hostile_payloads_are_all_accounted_for() {
    let total: u64 = std::env::var("SOAK_PAYLOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let mut rng = StdRng::seed_from_u64(7);
    let mut pending = Pending::with_limits(Limits {
        max_columns: 1000,
        max_record_bytes: 1 << 20,
    });
    let (mut rows, mut dead, mut tombstones, mut flushes, mut next) =
        (0u64, 0u64, 0u64, 0u64, 0i64);
    let mut flushed_rows = 0u64;
    let mut flushed_dead = 0u64;
    let mut sent = 0u64;
    while sent < total {
        let n = BATCH.min((total - sent) as usize);
        let payloads: Vec<Option<Vec<u8>>> = (0..n as u64)
            .map(|i| match rng.random_range(0..100) {
                0 => None,
                1..=4 => Some(hostile(&mut rng, sent + i)),
                _ => Some(normal(&mut rng, sent + i)),
            })
            .collect();
        let records: Vec<Record<'_>> = payloads
            .iter()
            .map(|p| {
                next += 1;
                Record {
                    partition: (next % 8) as i32,
                    offset: next / 8,
                    timestamp_ms: None,
                    key: None,
                    payload: p.as_deref(),
                }
            })
            .collect();
        let added = pending.add("t", &records);
        assert_eq!(
            added.rows + added.dead_letters.len() + added.tombstones,
            n,
            "conservation"
        );
        rows += added.rows as u64;
        dead += added.dead_letters.len() as u64;
        tombstones += added.tombstones as u64;
        sent += n as u64;
        if pending.bytes() >= FLUSH_BYTES || sent == total {
            let cut = pending
                .cut("t", FlushTrigger::Size, format!("f{flushes}"))
                .unwrap();
            flushes += 1;
            flushed_rows += cut.batches.iter().map(RecordBatch::num_rows).sum::<usize>() as u64;
            assert_eq!(
                cut.descriptor.expected_rows as usize,
                cut.batches.iter().map(RecordBatch::num_rows).sum::<usize>()
            );
            flushed_dead += cut
                .descriptor
                .dead_letters
                .iter()
                .filter(|l| !l.value_level)
                .count() as u64;
            let cols = cut.schema.fields().len();
            assert!(cols <= 1000 + 4, "flush has {cols} columns");
            for r in &cut.descriptor.ranges {
                assert!(r.first <= r.last);
            }
        }
    }
    assert_eq!(rows + dead + tombstones, total);
    assert_eq!((flushed_rows, flushed_dead), (rows, dead));
    let peak = peak_rss_mb();
    println!(
        "{total} payloads: {rows} rows, {dead} dead letters, {tombstones} tombstones, {flushes} flushes; peak RSS {peak:.0} MB"
    );
    // Two flushes' worth plus the runtime: bounded by FLUSH_BYTES, not by the input.
    assert!(
        peak < ((2 * FLUSH_BYTES) >> 20) as f64 + 300.0,
        "peak RSS {peak:.0} MB"
    );
}
