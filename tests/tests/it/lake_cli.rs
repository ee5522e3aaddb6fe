//! `millpond-lake` maintenance commands against real lakes filled by the
//! real writer: the embedded lake (SQLite catalog, local files) and a
//! Postgres catalog with data on S3 (moto).
use std::collections::BTreeMap;

use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::{lake_cli, lake_cli_with};
use millpond_tests::writer::Writer;

/// `n` flushes of `per` rows each into `events` (ids 0.., partitions 0 and
/// 1 in turn): with more than 10 rows each flush is one Parquet file.
async fn fill(lake: &Lake, n: usize, per: usize) {
    let writer = Writer::start(lake);
    let mut c = client(&writer.addr).await;
    for i in 0..n {
        let (p, first) = ((i % 2) as i32, (i / 2 * per) as i64);
        let range = OffsetRange::new("events", p, first, first + per as i64 - 1);
        put(
            &mut c,
            &descriptor(&format!("f{i}"), vec![range], per),
            vec![rows((i * per) as i64, per)],
        )
        .await
        .unwrap();
    }
    writer.stop();
}

fn live_files(lake: &Lake) -> usize {
    lake.query("SELECT data_file FROM ducklake_list_files('lake', 'events')")
        .len()
}

/// Rows and a hash over every value, `_inserted_at` included.
fn checksum(lake: &Lake) -> Vec<String> {
    lake.query(
        "SELECT count(*), sum(hash(id, name, _inserted_at)), min(id), max(id) FROM lake.main.events",
    )
}

fn one(lake: &Lake, sql: &str) -> String {
    lake.query(sql).remove(0)
}

fn snapshot(lake: &Lake) -> i64 {
    one(
        lake,
        "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')",
    )
    .parse()
    .unwrap()
}

fn scheduled(lake: &Lake) -> Vec<String> {
    lake.query(
        "SELECT path FROM __ducklake_metadata_lake.ducklake_files_scheduled_for_deletion ORDER BY 1",
    )
}

/// The storage key of a catalog file path (relative to its table folder).
fn in_storage<'a>(files: &'a BTreeMap<String, i64>, name: &str) -> Option<&'a String> {
    files.keys().find(|k| k.ends_with(&format!("/{name}")))
}

async fn compact_leaves_fewer_files_and_the_same_rows(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 50, 20).await;
    assert_eq!(live_files(&lake), 50);
    let before = checksum(&lake);
    assert_eq!(before[0].split('|').next(), Some("1000"));
    let last_before = snapshot(&lake);
    // An operator's table-scoped target that would keep files at 1 KB: the
    // run must merge to its tier's target all the same, and leave the
    // catalog's option as it was.
    lake.admin()
        .execute_batch(
            "CALL ducklake_set_option('lake', 'target_file_size', '1000B', schema => 'main', table_name => 'events')",
        )
        .unwrap();

    let dry = lake_cli(&lake, &["compact", "--dry-run"]);
    assert!(dry.ok().contains("main.events: 50 files"), "{dry:#?}");
    assert_eq!(live_files(&lake), 50, "a dry run changes nothing");

    let refused = lake_cli(&lake, &["compact"]);
    assert!(!refused.success(), "{refused:#?}");
    assert!(refused.stderr.contains("without --yes"), "{refused:#?}");
    assert!(refused.stdout.contains("target: "), "{refused:#?}");
    assert_eq!(live_files(&lake), 50, "refused without --yes");

    let run = lake_cli(
        &lake,
        &[
            "compact",
            "--yes",
            "--threads",
            "1",
            "--memory-limit",
            "512MiB",
        ],
    );
    run.ok();
    let after = live_files(&lake);
    eprintln!("compaction ({backend:?}): 50 -> {after} data files");
    assert_eq!(after, 1, "{run:#?}");
    assert_eq!(checksum(&lake), before);
    assert_eq!(
        lake.query(&format!(
            "SELECT count(*), sum(hash(id, name, _inserted_at)), min(id), max(id) FROM lake.main.events AT (VERSION => {last_before})"
        )),
        before,
        "the snapshot before compaction reads the same rows"
    );
    assert_eq!(
        lake.query(
            "SELECT value FROM ducklake_options('lake') WHERE option_name = 'target_file_size' AND scope = 'TABLE'"
        ),
        ["1000"],
        "the catalog's own target is unchanged"
    );
    assert_eq!(
        scheduled(&lake).len(),
        50,
        "the merged files wait for cleanup"
    );
    lake_cli(&lake, &["fsck"]).ok();
}

async fn expire_and_cleanup_free_only_expired_snapshots_files(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 6, 20).await;
    // Two deletes, each ending one whole file: A (ids 0..19) at snapshot
    // s1, B (ids 20..39) at s2.
    let admin = lake.admin();
    admin
        .execute_batch("DELETE FROM lake.main.events WHERE id < 20")
        .unwrap();
    let s1 = snapshot(&lake);
    admin
        .execute_batch("DELETE FROM lake.main.events WHERE id >= 20 AND id < 40")
        .unwrap();
    drop(admin);
    let ended = lake.query(
        "SELECT f.path FROM __ducklake_metadata_lake.ducklake_data_file f \
         JOIN __ducklake_metadata_lake.ducklake_table t ON t.table_id = f.table_id \
         WHERE t.table_name = 'events' AND f.end_snapshot IS NOT NULL ORDER BY f.end_snapshot",
    );
    assert_eq!(ended.len(), 2, "{ended:?}");
    let (a, b) = (ended[0].clone(), ended[1].clone());
    let storage = lake.storage_files();
    let a_path = in_storage(&storage, &a).expect("A in storage").clone();
    let b_path = in_storage(&storage, &b).expect("B in storage").clone();
    let snapshots = one(&lake, "SELECT count(*) FROM ducklake_snapshots('lake')");

    // Every snapshot is younger than an hour: nothing goes.
    let run = lake_cli(&lake, &["expire", "--older-than", "1h", "--yes"]);
    assert!(run.ok().contains("nothing to expire"), "{run:#?}");
    assert_eq!(
        one(&lake, "SELECT count(*) FROM ducklake_snapshots('lake')"),
        snapshots
    );

    // Keep s1 and everything after: only the snapshots before s1 read A.
    let keep = one(
        &lake,
        &format!("SELECT count(*) FROM ducklake_snapshots('lake') WHERE snapshot_id >= {s1}"),
    );
    lake_cli(&lake, &["expire", "--keep-last", &keep, "--yes"]).ok();
    assert_eq!(
        one(&lake, "SELECT count(*) FROM ducklake_snapshots('lake')"),
        keep
    );
    let waiting = scheduled(&lake);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(waiting[0].ends_with(&a), "{waiting:?} is not A ({a})");

    // The default safety age keeps a file scheduled seconds ago.
    let run = lake_cli(&lake, &["cleanup", "--yes"]);
    assert!(run.ok().contains("would delete 0 files"), "{run:#?}");
    assert!(lake.storage_files().contains_key(&a_path));

    let run = lake_cli(&lake, &["cleanup", "--yes", "--older-than", "0s"]);
    assert_eq!(run.listed(), std::slice::from_ref(&a_path), "{run:#?}");
    let mut expected = storage.clone();
    expected.remove(&a_path);
    assert_eq!(lake.storage_files(), expected, "only A left storage");
    assert!(lake.storage_files().contains_key(&b_path));
    assert!(scheduled(&lake).is_empty());
    assert_eq!(lake.count(), 80);
    assert_eq!(
        one(
            &lake,
            &format!("SELECT count(*) FROM lake.main.events AT (VERSION => {s1})")
        ),
        "100",
        "snapshot s1 still reads B"
    );
    lake_cli(&lake, &["fsck"]).ok();
}

async fn find_orphans_finds_the_planted_file_and_nothing_else(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 3, 20).await;
    // Files scheduled for deletion are known to the catalog: not orphans.
    lake_cli(&lake, &["compact", "--yes"]).ok();
    assert_eq!(scheduled(&lake).len(), 3);
    let planted = format!("{}main/events/planted-orphan.parquet", lake.data_path());
    lake.write_storage_file(&planted, 10);
    let storage = lake.storage_files();
    assert!(storage.contains_key(&planted));

    let young = lake_cli(&lake, &["find-orphans"]);
    assert!(young.ok().contains("found 0 files"), "{young:#?}");
    assert!(
        young.listed().is_empty(),
        "a fresh file is not an orphan yet"
    );

    let found = lake_cli(&lake, &["find-orphans", "--older-than", "0s"]);
    assert_eq!(found.listed(), std::slice::from_ref(&planted), "{found:#?}");

    let dry = lake_cli(&lake, &["delete-orphans", "--older-than", "0s"]);
    assert!(dry.ok().contains("dry run"), "{dry:#?}");
    let refused = lake_cli(
        &lake,
        &["delete-orphans", "--older-than", "0s", "--execute"],
    );
    assert!(!refused.success(), "{refused:#?}");
    assert_eq!(lake.storage_files(), storage, "nothing deleted yet");

    let run = lake_cli(
        &lake,
        &["delete-orphans", "--older-than", "0s", "--execute", "--yes"],
    );
    run.ok();
    let mut expected = storage.clone();
    expected.remove(&planted);
    assert_eq!(lake.storage_files(), expected, "only the orphan went");
    assert_eq!(lake.count(), 60);
    let again = lake_cli(&lake, &["find-orphans", "--older-than", "0s"]);
    assert!(again.listed().is_empty(), "{again:#?}");
}

async fn fsck_reports_a_missing_and_a_changed_file(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 4, 20).await;
    let clean = lake_cli(&lake, &["fsck"]);
    assert!(clean.ok().contains("no problems found"), "{clean:#?}");
    let files =
        lake.query("SELECT data_file FROM ducklake_list_files('lake', 'events') ORDER BY 1");
    assert_eq!(files.len(), 4);
    let sizes = lake.storage_files();
    lake.remove_storage_file(&files[0]);
    lake.write_storage_file(&files[1], 1000);
    assert_ne!(lake.storage_files()[&files[1]], sizes[&files[1]]);

    let run = lake_cli(&lake, &["fsck"]);
    assert_eq!(run.code, Some(1), "{run:#?}");
    let problems: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("fsck: missing") || l.starts_with("fsck: size"))
        .collect();
    assert_eq!(problems.len(), 2, "{run:#?}");
    assert!(
        problems[0].starts_with("fsck: missing file: data file ")
            && problems[0].contains(&files[0]),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("fsck: size mismatch: data file ")
            && problems[1].contains(&files[1]),
        "{problems:?}"
    );
    assert!(run.stdout.contains("2 problems found"), "{run:#?}");
    // The catalog itself is consistent.
    lake_cli(&lake, &["fsck", "--catalog-only"]).ok();
}

async fn maintain_runs_the_safe_chain(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 6, 20).await;
    // A flush of 5 rows stays inlined in the catalog (no Parquet file).
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let range = OffsetRange::new("events", 0, 60, 64);
    put(
        &mut c,
        &descriptor("small", vec![range], 5),
        vec![rows(120, 5)],
    )
    .await
    .unwrap();
    writer.stop();
    assert_eq!(live_files(&lake), 6);
    let before = checksum(&lake);
    let snapshots = one(&lake, "SELECT count(*) FROM ducklake_snapshots('lake')");

    let dry = lake_cli(&lake, &["maintain", "--dry-run"]);
    dry.ok();
    assert_eq!(live_files(&lake), 6, "{dry:#?}");
    assert_eq!(
        one(&lake, "SELECT count(*) FROM ducklake_snapshots('lake')"),
        snapshots
    );

    let run = lake_cli(
        &lake,
        &[
            "maintain",
            "--yes",
            "--expire-older-than",
            "0s",
            "--cleanup-older-than",
            "0s",
        ],
    );
    let out = run.ok();
    assert!(out.contains("main.events: 5 rows to Parquet"), "{out}");
    assert_eq!(live_files(&lake), 1, "{out}");
    assert_eq!(checksum(&lake), before);
    assert_eq!(
        one(&lake, "SELECT count(*) FROM ducklake_snapshots('lake')"),
        "1",
        "all but the newest expired"
    );
    assert!(scheduled(&lake).is_empty(), "{out}");
    let files = lake.storage_files();
    let events: Vec<&String> = files.keys().filter(|k| k.contains("/events/")).collect();
    assert_eq!(events.len(), 1, "{events:?}");

    let run = lake_cli(&lake, &["checkpoint", "--yes"]);
    assert!(run.ok().contains("checkpoint: after:"), "{run:#?}");
    assert_eq!(checksum(&lake), before);
    lake_cli(&lake, &["fsck"]).ok();
}

/// The maintenance job runs while a writer commits once a second (a pod
/// commits every FLUSH_INTERVAL_MS, a minute by default), as the Helm
/// CronJob runs beside the pods: on a SQLite catalog a writer commit during
/// one of maintain's transactions makes SQLite answer "database is locked",
/// so each side runs its statement again rather than fail (maintain after
/// attaching the lake again). Every flush is written once, and maintain
/// finishes its chain.
async fn maintain_runs_while_a_writer_commits(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 6, 20).await;
    let writer = Writer::start(&lake);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addr = writer.addr.clone();
    let pushing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut c = client(&addr).await;
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let first = 1_000 + (n * 20) as i64;
                let range = OffsetRange::new("events", 2, first, first + 19);
                let ack = put(
                    &mut c,
                    &descriptor(&format!("busy{n}"), vec![range], 20),
                    vec![rows(1_000 + (n * 20) as i64, 20)],
                )
                .await
                .unwrap();
                assert_eq!(ack.outcome(), AckOutcome::Written, "{ack:?}");
                n += 1;
                // Five a second starved maintain on a loaded machine: each
                // of its ten tries met a commit (SQLite lets one writer
                // in, and refuses the transaction that read first).
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            n
        })
    };
    // On this worker while the pushes go on on the other.
    let maintained: Vec<_> = tokio::task::block_in_place(|| {
        (0..2)
            .map(|_| {
                lake_cli(
                    &lake,
                    &[
                        "maintain",
                        "--yes",
                        "--expire-older-than",
                        "0s",
                        "--cleanup-older-than",
                        "0s",
                    ],
                )
            })
            .collect()
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let pushed = pushing.await.unwrap();
    writer.stop();
    for run in &maintained {
        assert!(run.ok().contains("maintain: after:"), "{run:#?}");
    }
    assert!(pushed > 0, "the writer committed while maintain ran");
    let want = 6 * 20 + pushed as i64 * 20;
    assert_eq!(lake.count(), want);
    assert_eq!(
        one(&lake, "SELECT count(DISTINCT id) FROM lake.main.events"),
        want.to_string(),
        "no row twice"
    );
}

/// A SQLite catalog read by another process (here an open read
/// transaction; a writer's is one between its reads and its commit) makes
/// maintain's write wait SQLite's busy timeout and then fail "database is
/// locked", which leaves DuckDB's attachment stuck in that transaction:
/// maintain attaches the lake again and runs the statement again once the
/// reader is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintain_attaches_again_after_sqlite_says_locked() {
    let lake = Lake::new(Backend::Embedded, "events");
    fill(&lake, 2, 20).await;
    // A flush of 5 rows stays inlined: maintain's first write moves it.
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let range = OffsetRange::new("events", 0, 20, 24);
    put(
        &mut c,
        &descriptor("small", vec![range], 5),
        vec![rows(40, 5)],
    )
    .await
    .unwrap();
    writer.stop();
    let reader = lake.reader();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM lake.main.events;")
        .unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(7));
        reader.execute_batch("COMMIT").unwrap();
    });
    let run = lake_cli(
        &lake,
        &[
            "maintain",
            "--yes",
            "--no-compact",
            "--expire-older-than",
            "0s",
            "--cleanup-older-than",
            "0s",
        ],
    );
    release.join().unwrap();
    let out = run.ok();
    assert!(out.contains("main.events: 5 rows to Parquet"), "{run:#?}");
    assert!(
        run.stderr
            .contains("a writer's commit got in the way (attempt 1)")
            && run.stderr.contains("database is locked"),
        "{run:#?}"
    );
    assert_eq!(lake.count(), 45);
}

async fn shell_runs_sql_on_the_lake(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 2, 20).await;
    let run = lake_cli(
        &lake,
        &[
            "shell",
            "--sql",
            "SELECT count(*) AS n FROM events",
            "--sql",
            "SELECT max(id) AS top FROM lake.main.events",
        ],
    );
    let out = run.ok();
    assert!(out.contains("| 40 |") && out.contains("| 39  |"), "{out}");
    let bad = lake_cli(&lake, &["shell", "--sql", "SELECT nope FROM events"]);
    assert_eq!(bad.code, Some(1), "{bad:#?}");
    assert!(bad.stderr.contains("nope"), "{bad:#?}");
    // DuckLake's commit retries sleep 1.5x longer each time, uncapped: a
    // maintenance session stops at 10 (the writer's default is 100).
    let retries = lake_cli(
        &lake,
        &[
            "shell",
            "--sql",
            "SELECT current_setting('ducklake_max_retry_count') AS retries",
        ],
    );
    assert!(retries.ok().contains("| 10      |"), "{retries:#?}");
}

macro_rules! both_backends {
    ($($name:ident),*) => {
        mod embedded {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::Embedded).await })*
        }
        mod postgres_s3 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::PostgresS3).await })*
        }
    };
}

// The commands beyond DuckLake's own functions, each on both backends.
mod lock;
mod maintenance;
mod partition_retention;
mod repairs;

both_backends!(
    compact_leaves_fewer_files_and_the_same_rows,
    expire_and_cleanup_free_only_expired_snapshots_files,
    find_orphans_finds_the_planted_file_and_nothing_else,
    fsck_reports_a_missing_and_a_changed_file,
    maintain_runs_the_safe_chain,
    maintain_runs_while_a_writer_commits,
    shell_runs_sql_on_the_lake
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_indexes_builds_the_catalog_btrees_once() {
    let lake = Lake::new(Backend::PostgresS3, "events");
    let ours = "SELECT count(*), bool_and(i.indisvalid) FROM pg_index i \
                JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'millpond\\_%'";
    // The writer builds the one every commit needs, in the background of
    // its start.
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let range = OffsetRange::new("events", 0, 0, 19);
    put(
        &mut c,
        &descriptor("f0", vec![range], 20),
        vec![rows(0, 20)],
    )
    .await
    .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lake.catalog_psql(ours) != "1|t" {
        assert!(
            std::time::Instant::now() < until,
            "{}",
            lake.catalog_psql(ours)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    writer.stop();
    let dry = lake_cli(&lake, &["bootstrap-indexes", "--dry-run"]);
    assert!(
        dry.ok().contains("CREATE INDEX CONCURRENTLY IF NOT EXISTS"),
        "{dry:#?}"
    );
    assert!(
        dry.ok()
            .contains(&format!("{} exists", millpond_writer::lake_api::PER_COMMIT)),
        "{dry:#?}"
    );
    assert_eq!(lake.catalog_psql(ours), "1|t");
    lake_cli(&lake, &["bootstrap-indexes"]).ok();
    let n = millpond_lake::INDEXES.len();
    assert_eq!(lake.catalog_psql(ours), format!("{n}|t"));
    let again = lake_cli(&lake, &["bootstrap-indexes"]);
    assert_eq!(again.ok().matches(" exists").count(), n, "{again:#?}");
    // The writer keeps working on an indexed catalog.
    fill(&lake, 1, 20).await;
    lake_cli(&lake, &["fsck"]).ok();
}

#[test]
fn bootstrap_indexes_is_for_postgres_only() {
    let lake = Lake::new(Backend::Embedded, "events");
    std::fs::create_dir_all(lake.data_path()).unwrap();
    lake.admin()
        .execute_batch("CREATE TABLE lake.main.events (id BIGINT)")
        .unwrap();
    let run = lake_cli(&lake, &["bootstrap-indexes"]);
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.contains("Postgres catalog"), "{run:#?}");
}

#[test]
fn configuration_errors_exit_2_and_a_missing_lake_is_not_created() {
    let lake = Lake::new(Backend::Embedded, "events");
    let run = lake_cli_with(&lake, &[("DUCKLAKE_RDS_HOST", "db")], &["fsck"]);
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert!(run.stderr.contains("DUCKLAKE_RDS_PASSWORD"), "{run:#?}");
    let run = lake_cli(&lake, &["fsck"]);
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.contains("no DuckLake catalog"), "{run:#?}");
    let dir = lake.env_value("MILLPOND_LAKE_DIR").unwrap();
    assert!(!std::path::Path::new(dir).exists(), "the CLI made a lake");
}
