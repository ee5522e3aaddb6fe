//! The writer's bounds across uploads: the bytes all DoPuts hold at once
//! (MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES) and how long one may send nothing
//! (MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S), each refused with
//! RESOURCE_EXHAUSTED and counted on `errors_total{type}`.
use std::time::{Duration, Instant};

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::FlightDescriptor;
use futures::TryStreamExt;
use millpond_proto::{AckOutcome, ErrorKind, OffsetRange, WriteError};
use millpond_tests::flight::{client, descriptor, put, recorded, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;
use prost::Message;

/// Rows of `rows()` in one flush: about 3.3 MB of Arrow data, so one fits
/// a 4 MiB bound and two do not.
const ROWS: usize = 150_000;

fn range(p: i32) -> Vec<OffsetRange> {
    vec![OffsetRange::new("events", p, 0, ROWS as i64 - 1)]
}

fn details(e: &tonic::Status) -> WriteError {
    WriteError::decode(e.details()).expect("the refusal carries a WriteError")
}

/// Six local clients put a flush each while the sink holds every write for
/// a second: the writer holds at most two flushes' bytes, refuses the rest
/// with RESOURCE_EXHAUSTED (retryable, `in_flight_bytes`) and counts them;
/// the accepted ones land whole, and once they are written the room is
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uploads_past_the_in_flight_bound_are_refused_as_retryable() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start_with(
        &lake,
        &[
            ("MILLPOND_WRITER_MAX_FLUSH_BYTES", "4MiB"),
            ("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES", "8MiB"),
            ("MILLPOND_FAILPOINT", "pause_before_commit:1000"),
        ],
    );
    let puts = (0..6).map(|p| {
        let addr = w.addr.clone();
        tokio::spawn(async move {
            let mut c = client(&addr).await;
            let d = descriptor(&format!("f{p}"), range(p), ROWS);
            put(&mut c, &d, vec![rows(p as i64 * ROWS as i64, ROWS)]).await
        })
    });
    let outcomes = futures::future::join_all(puts).await;
    let (mut written, mut refused) = (0, 0);
    for o in outcomes {
        match o.unwrap() {
            Ok(ack) => {
                assert_eq!(ack.outcome(), AckOutcome::Written);
                assert_eq!(ack.rows_written, ROWS as u64);
                written += 1;
            }
            Err(e) => {
                assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
                assert!(
                    e.message().contains("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES"),
                    "{e:?}"
                );
                let d = details(&e);
                assert_eq!(d.kind(), ErrorKind::Retryable, "a resend may fit");
                assert_eq!(d.error_type, "in_flight_bytes");
                refused += 1;
            }
        }
    }
    assert!(
        refused >= 1,
        "six flushes of 3.3 MB never fit 8 MiB at once"
    );
    assert!(written >= 1, "what fits is written");
    let errors = |t: &str| w.metric("millpond_errors_total", &[("type", t)]);
    assert_eq!(errors("in_flight_bytes"), refused as f64);
    assert_eq!(errors("flush_too_large"), 0.0);
    assert_eq!(w.metric("millpond_writer_in_flight_bytes", &[]), 0.0);
    // The room is back: a resend of a refused flush fits now.
    let mut c = client(&w.addr).await;
    let d = descriptor("again", range(9), ROWS);
    let ack = put(&mut c, &d, vec![rows(9 * ROWS as i64, ROWS)])
        .await
        .unwrap();
    assert_eq!(ack.rows_written, ROWS as u64);
    w.stop();
    assert_eq!(lake.count(), (written + 1) * ROWS as i64);
}

/// A flush that alone passes MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES (set below
/// the flush bound) would never fit: it is refused at once as permanent,
/// naming the setting, instead of waiting or being resent forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_larger_than_the_in_flight_bound_is_refused_as_permanent() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start_with(
        &lake,
        &[
            ("MILLPOND_WRITER_MAX_FLUSH_BYTES", "16MiB"),
            ("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES", "4MiB"),
        ],
    );
    let mut c = client(&w.addr).await;
    let d = descriptor("big", range(0), 2 * ROWS);
    let e = tokio::time::timeout(
        Duration::from_secs(30),
        put(&mut c, &d, vec![rows(0, ROWS), rows(ROWS as i64, ROWS)]),
    )
    .await
    .expect("refused at once, not left waiting")
    .expect_err("larger than the in-flight bound");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(
        e.message().contains("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES"),
        "{e:?}"
    );
    assert_eq!(details(&e).kind(), ErrorKind::Permanent);
    assert_eq!(
        w.metric("millpond_errors_total", &[("type", "flush_too_large")]),
        1.0
    );
    assert!(
        recorded(&mut c, "events").await.is_empty(),
        "nothing written"
    );
    w.stop();
}

/// An upload that stops sending is cut after
/// MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S with RESOURCE_EXHAUSTED
/// (`upload_idle`, retryable), and its bytes are released: a flush the
/// idle one kept out fits afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_upload_is_cut_and_its_bytes_released() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start_with(
        &lake,
        &[
            ("MILLPOND_WRITER_MAX_FLUSH_BYTES", "4MiB"),
            ("MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES", "4MiB"),
            ("MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S", "3"),
        ],
    );
    // The idle upload: its descriptor and batch, then silence, the sender
    // kept open.
    let batch = rows(0, ROWS);
    let fd = FlightDescriptor::new_cmd(descriptor("idle", range(0), ROWS).encode_to_vec());
    let messages: Vec<_> = FlightDataEncoderBuilder::new()
        .with_schema(batch.schema())
        .with_flight_descriptor(Some(fd))
        .build(futures::stream::iter([Ok(batch)]))
        .try_collect()
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(messages.len() + 1);
    for m in messages {
        tx.send(Ok(m)).await.unwrap();
    }
    let mut idle_client = client(&w.addr).await;
    let idle = tokio::spawn(async move {
        let started = Instant::now();
        let answer = match idle_client
            .do_put(futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|m| (m, rx))
            }))
            .await
        {
            Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()),
            Err(e) => Err(e),
        };
        (answer, started.elapsed())
    });
    let until = Instant::now() + Duration::from_secs(10);
    while w.metric("millpond_writer_in_flight_bytes", &[]) < 3e6 {
        assert!(Instant::now() < until, "the idle upload's bytes are held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // While it holds them, a flush of the same size does not fit.
    let mut c = client(&w.addr).await;
    let next = descriptor("next", range(1), ROWS);
    let e = put(&mut c, &next, vec![rows(ROWS as i64, ROWS)])
        .await
        .expect_err("the idle upload holds the room");
    assert_eq!(details(&e).error_type, "in_flight_bytes");

    let (answer, after) = tokio::time::timeout(Duration::from_secs(30), idle)
        .await
        .expect("the idle upload is cut")
        .unwrap();
    let e = match answer.expect_err("cut, not written") {
        arrow_flight::error::FlightError::Tonic(s) => *s,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(
        e.message()
            .contains("MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S"),
        "{e:?}"
    );
    assert_eq!(details(&e).error_type, "upload_idle");
    assert_eq!(details(&e).kind(), ErrorKind::Retryable);
    assert!(after >= Duration::from_secs(3), "cut after {after:?}");
    drop(tx);
    assert_eq!(
        w.metric("millpond_errors_total", &[("type", "upload_idle")]),
        1.0
    );
    assert_eq!(w.metric("millpond_writer_in_flight_bytes", &[]), 0.0);
    // Released: the flush it kept out fits now.
    let ack = put(&mut c, &next, vec![rows(ROWS as i64, ROWS)])
        .await
        .unwrap();
    assert_eq!(ack.rows_written, ROWS as u64);
    w.stop();
    assert_eq!(lake.count(), ROWS as i64, "nothing of the idle upload");
}

/// A flush's dead letters count against MILLPOND_WRITER_MAX_FLUSH_BYTES as
/// its rows do: a descriptor carrying 6 MB of them in a flush of a few rows
/// is refused (`flush_too_large`), nothing written; the same rows with few
/// letters land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_count_against_the_flush_bound() {
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start_with(&lake, &[("MILLPOND_WRITER_MAX_FLUSH_BYTES", "4MiB")]);
    let mut c = client(&w.addr).await;
    let letter = |offset: i64| millpond_proto::DeadLetter {
        topic: "events".into(),
        offset,
        reason: "invalid_json".into(),
        original: vec![b'x'; 1000],
        ..Default::default()
    };
    let mut d = descriptor("letters", vec![OffsetRange::new("events", 0, 0, 6_009)], 10);
    d.dead_letters = (10..6_010).map(letter).collect();
    let e = put(&mut c, &d, vec![rows(0, 10)])
        .await
        .expect_err("6 MB of dead letters past a 4 MiB flush bound");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert_eq!(details(&e).kind(), ErrorKind::Permanent);
    assert_eq!(
        w.metric("millpond_errors_total", &[("type", "flush_too_large")]),
        1.0
    );
    assert!(
        recorded(&mut c, "events").await.is_empty(),
        "nothing written"
    );
    let mut d = descriptor("few", vec![OffsetRange::new("events", 0, 0, 19)], 10);
    d.dead_letters = (10..20).map(letter).collect();
    let ack = put(&mut c, &d, vec![rows(0, 10)]).await.unwrap();
    assert_eq!(
        (ack.rows_written, ack.dead_letters_written, ack.outcome()),
        (10, 10, AckOutcome::Written)
    );
    w.stop();
}
