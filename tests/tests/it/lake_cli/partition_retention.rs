//! list-droppable-partitions and drop-partitions on a table the real writer
//! partitions by year, month and day of `ts`: partitions past the retention
//! go (their rows at once, their files at the cleanup after expiry), the
//! rest stay whole, a writer committing meanwhile loses nothing, a file
//! whose statistics contradict its partition is left, and a table whose
//! partitions are not spans of time is refused.
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chrono::{DateTime, Datelike, NaiveTime, TimeDelta, Utc};
use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{client, descriptor, put};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::{lake_cli, lake_cli_with, Run};
use millpond_tests::writer::Writer;

use super::one;

const META: &str = "__ducklake_metadata_lake";

fn batch(ids: std::ops::Range<i64>, ts: Option<DateTime<Utc>>) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ])),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(
                TimestampMicrosecondArray::from_iter(ids.map(|_| ts.map(|t| t.timestamp_micros())))
                    .with_timezone("UTC"),
            ),
        ],
    )
    .unwrap()
}

/// Noon (UTC) `days` days before today.
fn noon(days: i64) -> DateTime<Utc> {
    (Utc::now().date_naive() - TimeDelta::days(days))
        .and_time(NaiveTime::from_hms_opt(12, 0, 0).unwrap())
        .and_utc()
}

fn folder(t: DateTime<Utc>) -> String {
    format!("year={}/month={}/day={}/", t.year(), t.month(), t.day())
}

/// Puts flushes on Kafka partition `p`, one range after another.
struct Putter {
    c: arrow_flight::FlightClient,
    p: i32,
    next: i64,
    n: usize,
}

/// A writer partitioning `events` by year, month and day of `ts`.
fn partitioned_writer(lake: &Lake) -> Writer {
    Writer::start_with(
        lake,
        &[("DUCKLAKE_PARTITION_BY", "year(ts), month(ts), day(ts)")],
    )
}

impl Putter {
    async fn at(addr: &str, p: i32) -> Putter {
        Putter {
            c: client(addr).await,
            p,
            next: 0,
            n: 0,
        }
    }

    async fn put(&mut self, ids: std::ops::Range<i64>, ts: Option<DateTime<Utc>>) {
        let len = (ids.end - ids.start) as usize;
        let range = OffsetRange::new("events", self.p, self.next, self.next + len as i64 - 1);
        self.next += len as i64;
        self.n += 1;
        let ack = put(
            &mut self.c,
            &descriptor(&format!("p{}-{}", self.p, self.n), vec![range], len),
            vec![batch(ids, ts)],
        )
        .await
        .unwrap();
        assert_eq!(ack.outcome(), AckOutcome::Written, "{ack:?}");
    }
}

/// `millpond-lake <command> --table <table> --older-than <age> <extra>`.
fn retention(lake: &Lake, command: &str, table: &str, age: &str, extra: &[&str]) -> Run {
    let mut args = vec![command, "--table", table, "--older-than", age];
    args.extend_from_slice(extra);
    lake_cli(lake, &args)
}

fn count(lake: &Lake, filter: &str) -> i64 {
    one(
        lake,
        &format!("SELECT count(*) FROM lake.main.events WHERE {filter}"),
    )
    .parse()
    .unwrap()
}

fn ts_literal(t: DateTime<Utc>) -> String {
    format!("TIMESTAMPTZ '{}'", t.format("%Y-%m-%d %H:%M:%S+00"))
}

async fn partitions_past_the_retention_go_and_the_rest_stay(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = partitioned_writer(&lake);
    let mut first = Putter::at(&writer.addr, 0).await;
    // 50 rows on each of three old days and three recent ones, none near
    // the 5-day edge (a run across midnight decides the same), and 5 rows
    // without a time.
    let (old, recent) = ([10, 9, 8], [2, 1, 0]);
    for (i, d) in old.iter().chain(&recent).enumerate() {
        first
            .put(i as i64 * 50..i as i64 * 50 + 50, Some(noon(*d)))
            .await;
    }
    first.put(300..305, None).await;
    let cutoff = ts_literal(noon(5));

    let plain = "CREATE TABLE lake.main.plain (id BIGINT)";
    lake.execute(plain);
    // Refused, and before anything changes: its inlined rows stay inlined.
    lake.execute("INSERT INTO lake.main.plain VALUES (1), (2), (3)");
    let both: [(&str, &[&str]); 2] = [
        ("list-droppable-partitions", &[]),
        ("drop-partitions", &["--execute", "--yes"]),
    ];
    for (command, extra) in both {
        let refused = retention(&lake, command, "plain", "5d", extra);
        assert_eq!(refused.code, Some(1), "{refused:#?}");
        assert!(
            refused.stderr.contains("main.plain is not partitioned"),
            "{refused:#?}"
        );
    }
    assert_eq!(
        one(
            &lake,
            "SELECT count(*) FROM ducklake_list_files('lake', 'plain')"
        ),
        "0"
    );
    let short = retention(&lake, "drop-partitions", "events", "30m", &[]);
    assert_eq!(short.code, Some(2), "{short:#?}");
    assert!(short.stderr.contains("under 1h"), "{short:#?}");

    let listed = retention(&lake, "list-droppable-partitions", "events", "5d", &[]);
    let out = listed.ok();
    for d in old {
        let label = folder(noon(d)).trim_end_matches('/').to_owned();
        assert!(out.contains(&format!("  {label}  ")), "{d} days ago: {out}");
    }
    for d in recent {
        let label = folder(noon(d)).trim_end_matches('/').to_owned();
        assert!(!out.contains(&label), "{d} days ago is inside: {out}");
    }
    assert!(
        out.contains("droppable: 3 partitions, 3 files, 150 rows"),
        "{out}"
    );
    // The 5 rows without a time are few enough for the catalog to hold
    // inline, so no file of theirs is listed yet.
    assert!(
        out.contains("kept: 3 partitions"),
        "three recent days: {out}"
    );

    // A dry run by default.
    let dry = retention(&lake, "drop-partitions", "events", "5d", &["--yes"]);
    assert!(dry.ok().contains("dry run, nothing dropped"), "{dry:#?}");
    assert_eq!(lake.count(), 305);

    // A writer commits all along: recent rows, and late events for a
    // dropped day.
    let stop = Arc::new(AtomicBool::new(false));
    let pushing = {
        let (stop, addr) = (stop.clone(), writer.addr.clone());
        tokio::spawn(async move {
            let mut busy = Putter::at(&addr, 1).await;
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let base = 10_000 + n * 20;
                busy.put(base..base + 10, Some(Utc::now())).await;
                busy.put(base + 10..base + 20, Some(noon(9))).await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            n
        })
    };
    let dropped = tokio::task::block_in_place(|| {
        retention(
            &lake,
            "drop-partitions",
            "events",
            "5d",
            &["--execute", "--yes"],
        )
    });
    stop.store(true, Ordering::Relaxed);
    let pushed = pushing.await.unwrap();
    let out = dropped.ok();
    assert!(pushed > 0, "the writer committed while the drop ran");
    assert!(
        out.contains("drop-partitions: dropped 3 partitions of main.events"),
        "{out}"
    );
    let last = out.lines().last().unwrap();
    assert!(last.contains("partitions_dropped=3"), "{last}");
    let rows_dropped: i64 = last
        .split_whitespace()
        .find_map(|w| w.strip_prefix("rows_dropped="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(rows_dropped >= 150, "{last}");

    // Nothing inside the retention was touched: every recent row and
    // every row without a time, the writer's included.
    assert_eq!(count(&lake, &format!("ts >= {cutoff}")), 150 + pushed * 10);
    assert_eq!(count(&lake, "ts IS NULL"), 5);
    // The old rows written before the drop are gone; late events committed
    // after it stay until the next run.
    assert_eq!(count(&lake, &format!("ts < {cutoff} AND id < 10000")), 0);
    let late = count(&lake, &format!("ts < {cutoff}"));
    assert_eq!(
        lake.count(),
        305 + pushed * 20 - rows_dropped,
        "rows before, less the rows it says it dropped"
    );
    assert_eq!(
        rows_dropped + late,
        150 + pushed * 10,
        "every old row counted once"
    );

    // The next run, as the chart's schedule runs it: the recipe, with the
    // table and the retention from the environment (refused without one).
    let unset = lake_cli(&lake, &["--yes", "run", "drop-partitions"]);
    assert_eq!(unset.code, Some(1), "{unset:#?}");
    assert!(
        unset.stderr.contains("set MILLPOND_LAKE_RETENTION"),
        "{unset:#?}"
    );
    let again = lake_cli_with(
        &lake,
        &[("MILLPOND_LAKE_RETENTION", "5d")],
        &["--yes", "run", "drop-partitions"],
    );
    let out = again.ok();
    if late > 0 {
        assert!(out.contains(&format!("{late} rows")), "{out}");
    }
    assert_eq!(count(&lake, &format!("ts < {cutoff}")), 0);
    writer.stop();

    // The dropped files stay for older snapshots until they expire; then
    // cleanup deletes them, and only them.
    let old_folders: Vec<String> = old.iter().map(|d| folder(noon(*d))).collect();
    let in_old = |files: &std::collections::BTreeMap<String, i64>| {
        files
            .keys()
            .filter(|f| old_folders.iter().any(|o| f.contains(o.as_str())))
            .count()
    };
    assert!(in_old(&lake.storage_files()) >= 3);
    lake_cli(&lake, &["expire", "--keep-last", "1", "--yes"]).ok();
    lake_cli(&lake, &["cleanup-all", "--yes"]).ok();
    let left = lake.storage_files();
    assert_eq!(in_old(&left), 0, "{left:#?}");
    let live: BTreeSet<String> = lake
        .query("SELECT data_file FROM ducklake_list_files('lake', 'events')")
        .into_iter()
        .collect();
    for f in &live {
        assert!(left.contains_key(f), "live file {f} deleted");
    }
    assert_eq!(count(&lake, &format!("ts >= {cutoff}")), 150 + pushed * 10);
    lake_cli(&lake, &["fsck"]).ok();
}

/// A file whose partition values say an old day while its rows are recent
/// (values a bad import or repair left) is never dropped on the catalog's
/// word: its statistics decide, and the run says so and exits 1.
async fn a_file_whose_statistics_contradict_its_partition_is_left(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let writer = partitioned_writer(&lake);
    let mut p = Putter::at(&writer.addr, 0).await;
    p.put(0..40, Some(noon(20))).await;
    p.put(40..100, Some(noon(1))).await;
    writer.stop();
    let recent: i64 = one(
        &lake,
        &format!(
            "SELECT data_file_id FROM {META}.ducklake_data_file WHERE end_snapshot IS NULL \
             AND record_count = 60"
        ),
    )
    .parse()
    .unwrap();
    let old = noon(20);
    for (index, value) in [(0, old.year() as u32), (1, old.month()), (2, old.day())] {
        lake.execute(&format!(
            "UPDATE {META}.ducklake_file_partition_value SET partition_value = '{value}' \
             WHERE data_file_id = {recent} AND partition_key_index = {index}"
        ));
    }
    let listed = retention(&lake, "list-droppable-partitions", "events", "5d", &[]);
    assert_eq!(listed.code, Some(1), "{listed:#?}");
    assert!(
        listed
            .stdout
            .contains(&format!("left: data file {recent} of ")),
        "{listed:#?}"
    );
    assert!(
        listed.stdout.contains("its statistics hold ts up to"),
        "{listed:#?}"
    );
    assert!(
        listed
            .stdout
            .contains("droppable: 1 partitions, 1 files, 40 rows"),
        "{listed:#?}"
    );
    let dropped = retention(
        &lake,
        "drop-partitions",
        "events",
        "5d",
        &["--execute", "--yes"],
    );
    assert_eq!(dropped.code, Some(1), "{dropped:#?}");
    assert_eq!(
        lake.count(),
        60,
        "the old rows went, the recent ones stayed"
    );
    assert_eq!(count(&lake, "id >= 40"), 60);
}

both_backends!(
    partitions_past_the_retention_go_and_the_rest_stay,
    a_file_whose_statistics_contradict_its_partition_is_left
);
