//! DoPut into a local (embedded) DuckLake, against calling the sink in
//! process: rows/s and Arrow MB/s, and what the Flight hop costs.
//!
//! Needs the DuckDB extensions (scripts/setup-extensions.sh).
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{FlightClient, FlightDescriptor};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::TryStreamExt;
use millpond_proto::{FlushDescriptor, FlushTrigger, OffsetRange};
use millpond_shared::config::{Env, EnvReader};
use millpond_shared::metrics::{new_registry, WriterMetrics};
use millpond_writer::flight::{serve, WriterService, DEFAULT_MAX_MESSAGE_BYTES};
use millpond_writer::health::WriterHealth;
use millpond_writer::sink::ducklake::config::DuckLakeConfig;
use millpond_writer::sink::ducklake::DuckLakeSink;
use millpond_writer::sink::{Flush, SharedSink, Sink};
use prost::Message;

mod sample_flush;

const ROWS: u64 = 100_000;

fn sink(dir: &std::path::Path) -> DuckLakeSink {
    let env = Env::from_pairs(
        [
            ("DUCKLAKE_TABLE", "events".to_owned()),
            ("MILLPOND_LAKE_DIR", dir.display().to_string()),
            ("HOME", std::env::var("HOME").unwrap()),
        ]
        .into_iter()
        .chain(
            std::env::var("DUCKDB_EXTENSION_DIR")
                .ok()
                .map(|d| ("DUCKDB_EXTENSION_DIR", d)),
        ),
    );
    let mut r = EnvReader::new(&env);
    let cfg = DuckLakeConfig::parse(&mut r).unwrap();
    r.finish().unwrap();
    DuckLakeSink::connect(cfg, WriterMetrics::new(&new_registry("bench", ""))).unwrap()
}

fn bench(c: &mut Criterion) {
    let batches = sample_flush::batches(ROWS);
    let bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    let schema = batches[0].schema();
    let mut g = c.benchmark_group("flush_100k_posthog_events");
    g.sample_size(10).measurement_time(Duration::from_secs(20));

    // In process: the sink alone.
    let dir = tempfile::tempdir().unwrap();
    let mut s = sink(dir.path());
    let mut next = 0i64;
    g.throughput(Throughput::Elements(ROWS));
    g.bench_function("sink_in_process_rows", |b| {
        b.iter(|| {
            let flush = Flush {
                id: format!("b{next}"),
                trigger: FlushTrigger::Size,
                ranges: vec![OffsetRange::new("events", 0, next, next + ROWS as i64 - 1)],
                schema: schema.clone(),
                batches: batches.clone(),
                dead_letters: Default::default(),
                streamed: None,
            };
            next += ROWS as i64;
            let deadline = s.deadline();
            s.write(&flush, deadline).unwrap();
        })
    });

    // Through Flight on 127.0.0.1.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let shared: SharedSink = Arc::new(Mutex::new(Box::new(sink(dir2.path())) as Box<dyn Sink>));
    let (fatal, _rx) = tokio::sync::watch::channel(None);
    let registry = new_registry("bench", "");
    let service = WriterService::new(
        shared,
        WriterMetrics::new(&registry),
        Arc::new(WriterHealth::default()),
        fatal,
    );
    let server = rt
        .block_on(serve(
            "127.0.0.1:0".parse().unwrap(),
            service,
            DEFAULT_MAX_MESSAGE_BYTES,
            millpond_proto::FLOW_WINDOW_BYTES,
            std::future::pending(),
        ))
        .unwrap();
    let mut client = rt.block_on(async {
        let ch = tonic::transport::Channel::from_shared(format!("http://{}", server.addr))
            .unwrap()
            .initial_stream_window_size(millpond_proto::FLOW_WINDOW_BYTES)
            .initial_connection_window_size(millpond_proto::FLOW_WINDOW_BYTES)
            .connect()
            .await
            .unwrap();
        FlightClient::new(ch)
    });
    let mut next = 0i64;
    for (name, tp) in [
        ("flight_doput_rows", Throughput::Elements(ROWS)),
        ("flight_doput_arrow_bytes", Throughput::Bytes(bytes as u64)),
    ] {
        g.throughput(tp);
        g.bench_function(name, |b| {
            b.iter(|| {
                let desc = FlushDescriptor {
                    flush_id: format!("f{next}"),
                    trigger: FlushTrigger::Size as i32,
                    ranges: vec![OffsetRange::new("events", 0, next, next + ROWS as i64 - 1)],
                    expected_rows: ROWS,
                    dead_letters: Default::default(),
                    trailer: false,
                };
                next += ROWS as i64;
                let stream = FlightDataEncoderBuilder::new()
                    .with_schema(schema.clone())
                    .with_flight_descriptor(Some(FlightDescriptor::new_cmd(desc.encode_to_vec())))
                    .build(futures::stream::iter(batches.clone().into_iter().map(Ok)));
                rt.block_on(async {
                    client
                        .do_put(stream)
                        .await
                        .unwrap()
                        .try_collect::<Vec<_>>()
                        .await
                        .unwrap()
                });
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
