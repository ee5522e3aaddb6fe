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
    // Built in the background of the writer's start.
    wait_for_valid_index(&lake);
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
    wait_for_valid_index(&lake);
    w.stop();
    assert!(lake.catalog_psql(index).contains("(table_id, column_id)"));
    assert_eq!(lake.count(), 200);
}

const PER_COMMIT_STATE: &str = "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i \
     JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'millpond_file_column_stats_by_column'";

/// Waits (30 s at most) until the per-commit index exists and is valid.
fn wait_for_valid_index(lake: &Lake) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let state = lake.catalog_psql(PER_COMMIT_STATE);
        if state.starts_with("t|") {
            return;
        }
        assert!(
            Instant::now() < until,
            "no valid index within 30 s: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A writer starting on a catalog without the index builds it without
/// holding up anyone's commits: here a long transaction that wrote to
/// `ducklake_file_column_stats` (as a commit in progress does) is open
/// while it starts. A plain CREATE INDEX would wait for that transaction,
/// and every other writer's next commit would queue behind it (the
/// operator saw 43.7 s on 20 million rows); CONCURRENTLY lets them all
/// commit, and the build finishes once the transaction ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writers_index_build_never_holds_up_commits() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let running = Writer::start_with(&lake, &[]);
    let ack = send(&running, "first", r(0, 0, 99), 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    wait_for_valid_index(&lake);
    lake.catalog_psql("DROP INDEX millpond_file_column_stats_by_column");
    let long = lake.catalog_psql_spawn(
        "BEGIN; LOCK TABLE ducklake_file_column_stats IN ROW EXCLUSIVE MODE; SELECT pg_sleep(15); COMMIT;",
    );
    let opened = Instant::now();
    std::thread::sleep(Duration::from_millis(500));

    // The second writer starts (and ready) while the transaction is open.
    let env = lake.env.clone();
    let log_dir = lake.dir.path().to_path_buf();
    let starting = tokio::task::spawn_blocking(move || {
        Writer::start_env(&env, &log_dir, &[("POD_NAME", "millpond-1")])
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The running writer commits a flush of files (statistics rows) meanwhile.
    let t = Instant::now();
    let ack = send(&running, "during", r(0, 100, 199), 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    let took = t.elapsed();
    let second = starting.await.unwrap();
    let ack = send(&second, "second", r(1, 0, 99), 1000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    assert!(
        opened.elapsed() < Duration::from_secs(12),
        "both wrote while the transaction was open (it ends after 15 s); the running writer's commit took {took:?}"
    );
    assert_ne!(
        lake.catalog_psql(PER_COMMIT_STATE).split('|').next(),
        Some("t"),
        "the build waits for the open transaction"
    );
    let out = long.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for_valid_index(&lake);
    assert!(lake
        .catalog_psql(PER_COMMIT_STATE)
        .contains("(table_id, column_id)"));
    running.stop();
    second.stop();
    assert_eq!(lake.count(), 300);
}

/// A concurrent build that was interrupted leaves an invalid index, which
/// Postgres keeps up but never reads. A writer's start finds it and builds
/// it again, as does `millpond-lake bootstrap-indexes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_left_invalid_by_an_interrupted_build_is_built_again() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let w = Writer::start_with(&lake, &[]);
    let ack = send(&w, "first", r(0, 0, 99), 0).await.unwrap().unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written);
    wait_for_valid_index(&lake);
    w.stop();
    // An interrupted concurrent build: a UNIQUE one fails on the table's
    // repeated table ids and leaves the name behind, invalid.
    let leave_invalid = || {
        lake.catalog_psql("DROP INDEX millpond_file_column_stats_by_column");
        let failed = lake.catalog_psql_spawn(
            "CREATE UNIQUE INDEX CONCURRENTLY millpond_file_column_stats_by_column ON ducklake_file_column_stats (table_id)",
        );
        assert!(!failed.wait_with_output().unwrap().status.success());
        assert!(lake.catalog_psql(PER_COMMIT_STATE).starts_with("f|"));
    };
    leave_invalid();
    let w = Writer::start_with(&lake, &[]);
    wait_for_valid_index(&lake);
    assert!(
        w.proc
            .logs()
            .contains("left invalid by an interrupted build"),
        "{}",
        w.proc.logs()
    );
    w.stop();
    let def = lake.catalog_psql(PER_COMMIT_STATE);
    assert!(
        def.contains("(table_id, column_id)") && !def.contains("UNIQUE"),
        "{def}"
    );

    leave_invalid();
    let run = millpond_tests::lake_cli::lake_cli(&lake, &["bootstrap-indexes"]);
    assert!(
        run.ok().contains("millpond_file_column_stats_by_column was invalid (an interrupted build): dropped and built again"),
        "{run:#?}"
    );
    let def = lake.catalog_psql(PER_COMMIT_STATE);
    assert!(
        def.starts_with("t|") && def.contains("(table_id, column_id)"),
        "{def}"
    );
}
