//! Many writers on one Postgres catalog: they commit in turn (the writer's
//! commit_lock.rs), a writer held between its BEGIN and COMMIT keeping the
//! others' commits waiting and one stalled longer than
//! DUCKLAKE_COMMIT_LOCK_WAIT_MS delaying them by that wait only; and the
//! catalog has the index DuckLake's per-commit statistics reads need.
use std::time::{Duration, Instant};

use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;

fn r(p: i32, first: i64, last: i64) -> OffsetRange {
    OffsetRange::new("events", p, first, last)
}

/// The snapshot that holds flush `id`.
fn snapshot_of(lake: &Lake, id: &str) -> i64 {
    let found = lake.query(&format!(
        "SELECT snapshot_id FROM ducklake_snapshots('lake') WHERE commit_message = 'millpond flush {id}'"
    ));
    assert_eq!(found.len(), 1, "flush {id}: {found:?}");
    found[0].parse().unwrap()
}

/// Sends `rows` as flush `id` of `range` to `w`, in the background.
fn send(
    w: &Writer,
    id: &'static str,
    range: OffsetRange,
    first_id: i64,
) -> tokio::task::JoinHandle<Result<millpond_proto::FlushAck, tonic::Status>> {
    let addr = w.addr.clone();
    let n = (range.last - range.first + 1) as usize;
    tokio::spawn(async move {
        let mut c = client(&addr).await;
        put(
            &mut c,
            &descriptor(id, vec![range], n),
            vec![rows(first_id, n)],
        )
        .await
    })
}

/// Waits until `w` has logged `text` `times` times.
async fn logged(w: &Writer, text: &str, times: usize) {
    let until = Instant::now() + Duration::from_secs(20);
    while w.proc.logs().matches(text).count() < times {
        assert!(Instant::now() < until, "{}", w.proc.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_one_catalog_commit_in_turn() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let held = Writer::start_with(
        &lake,
        &[
            ("POD_NAME", "millpond-held"),
            ("MILLPOND_FAILPOINT", "pause_before_commit:5000"),
        ],
    );
    let other = Writer::start_with(&lake, &[("POD_NAME", "millpond-other")]);
    let impatient = Writer::start_with(
        &lake,
        &[
            ("POD_NAME", "millpond-impatient"),
            ("DUCKLAKE_COMMIT_LOCK_WAIT_MS", "200"),
        ],
    );

    // Held between BEGIN and COMMIT, the first writer has the lock: the
    // other writer's flush, sent meanwhile, commits after it.
    let first = send(&held, "held-1", r(0, 0, 99), 0);
    logged(&held, "failpoint pause_before_commit", 1).await;
    let second = send(&other, "other-1", r(1, 0, 99), 1000);
    for ack in [first.await.unwrap(), second.await.unwrap()] {
        assert_eq!(ack.unwrap().outcome(), AckOutcome::Written);
    }
    assert!(
        snapshot_of(&lake, "held-1") < snapshot_of(&lake, "other-1"),
        "the other writer committed while the first held the lock"
    );
    assert!(!other.proc.logs().contains("committing without it"));

    // A writer that waits at most 200 ms gives the lock up and commits
    // while the holder is still held; both flushes land once.
    let third = send(&held, "held-2", r(0, 100, 199), 100);
    logged(&held, "failpoint pause_before_commit", 2).await;
    let fourth = send(&impatient, "impatient-1", r(2, 0, 99), 2000);
    let impatient_ack = fourth.await.unwrap().unwrap();
    assert_eq!(impatient_ack.outcome(), AckOutcome::Written);
    assert!(!third.is_finished(), "the holder is still held");
    assert!(
        impatient
            .proc
            .logs()
            .contains("held the commit lock past DUCKLAKE_COMMIT_LOCK_WAIT_MS"),
        "{}",
        impatient.proc.logs()
    );
    assert_eq!(third.await.unwrap().unwrap().outcome(), AckOutcome::Written);
    assert!(snapshot_of(&lake, "impatient-1") < snapshot_of(&lake, "held-2"));

    for w in [held, other, impatient] {
        w.stop();
    }
    assert_eq!(lake.count(), 400, "every flush once");
}

/// DuckLake creates no index on `ducklake_file_column_stats`, which it reads
/// by table and column whenever a query filters a table; the writer adds
/// one at startup, and a writer started after it was dropped adds it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_indexes_the_catalogs_file_statistics() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let index =
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'millpond_file_column_stats_by_column'";
    let w = Writer::start_with(&lake, &[]);
    let ack = send(&w, "first", r(0, 0, 99), 0).await.unwrap().unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    w.stop();
    let def = lake.catalog_psql(index);
    assert!(
        def.contains("ducklake_file_column_stats USING btree (table_id, column_id)"),
        "{def:?}"
    );
    lake.catalog_psql("DROP INDEX millpond_file_column_stats_by_column");
    assert_eq!(lake.catalog_psql(index).trim(), "");
    let w = Writer::start_with(&lake, &[]);
    let ack = send(&w, "second", r(0, 100, 199), 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    w.stop();
    assert!(lake.catalog_psql(index).contains("(table_id, column_id)"));
    assert_eq!(lake.count(), 200);
}
