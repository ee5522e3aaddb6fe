//! The repairs: heal-orphans, dedup-deletions, purge-orphan-stats,
//! repair-partition-values. Each test builds the broken state by hand,
//! shows it broken, and shows the command's repair.
use std::time::{Duration, Instant};

use millpond_proto::{DeadLetter, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::lake_cli;
use millpond_tests::writer::Writer;

use super::{checksum, fill, one, scheduled};

const META: &str = "__ducklake_metadata_lake";

/// Removes every catalog row of a data file, as a lost commit or a bad
/// edit would leave it: its file stays in storage.
fn forget_file(lake: &Lake, id: &str) {
    for t in [
        "ducklake_file_column_stats",
        "ducklake_file_partition_value",
        "ducklake_data_file",
    ] {
        lake.execute(&format!("DELETE FROM {META}.{t} WHERE data_file_id = {id}"));
    }
}

async fn heal_orphans_registers_lost_files_and_moves_the_rest_aside(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 4, 20).await;
    let before = checksum(&lake);
    let data = lake.data_path();
    let folder = format!("{data}main/events/");
    let live = lake.query(&format!(
        "SELECT f.data_file_id, f.path FROM {META}.ducklake_data_file f JOIN {META}.ducklake_table t USING (table_id) \
         WHERE t.table_name = 'events' AND f.end_snapshot IS NULL ORDER BY 1"
    ));
    let (lost_id, _) = live[0].split_once('|').unwrap();
    forget_file(&lake, lost_id);
    assert_eq!(lake.count(), 60, "a file's rows are gone from the table");
    let copy = format!("{folder}copy-of-a-live-file.parquet");
    lake.copy_storage_file(
        &format!("{folder}{}", live[1].split_once('|').unwrap().1),
        &copy,
    );
    let foreign = format!("{folder}planted-orphan.parquet");
    lake.write_storage_file(&foreign, 10);
    let stray = format!("{data}stray.parquet");
    lake.write_storage_file(&stray, 5);
    let storage = lake.storage_files();

    let young = lake_cli(&lake, &["heal-orphans", "--dry-run"]);
    assert!(young.ok().contains(": 0 to register"), "{young:#?}");
    let dry = lake_cli(&lake, &["heal-orphans", "--older-than", "0s", "--dry-run"]);
    let out = dry.ok();
    assert!(out.contains("register in main.events (20 rows)"), "{out}");
    assert!(
        out.contains("copy-of-a-live-file.parquet: move aside: 20 of its 20 rows are already"),
        "{out}"
    );
    assert!(
        out.contains("planted-orphan.parquet: move aside: columns the table does not have"),
        "{out}"
    );
    assert!(
        out.contains("1 to register, 2 to move") && out.contains("1 elsewhere"),
        "{out}"
    );
    assert_eq!(lake.storage_files(), storage);
    assert_eq!(lake.count(), 60);
    let refused = lake_cli(&lake, &["heal-orphans", "--older-than", "0s"]);
    assert!(
        !refused.success() && refused.stdout.contains("target: "),
        "{refused:#?}"
    );

    let run = lake_cli(&lake, &["heal-orphans", "--older-than", "0s", "--yes"]);
    assert!(run.ok().contains("1 registered, 2 moved"), "{run:#?}");
    assert_eq!(
        checksum(&lake),
        before,
        "the lost rows are back, every value as it was"
    );
    let quarantine = format!("{}-quarantine/", data.trim_end_matches('/'));
    let moved = lake.files_under(&quarantine);
    let mut expected = storage.clone();
    for f in [&copy, &foreign] {
        let size = expected.remove(f).unwrap();
        let aside = f.replacen(&data, &quarantine, 1);
        assert_eq!(moved.get(&aside), Some(&size), "{aside} in {moved:?}");
    }
    assert_eq!(moved.len(), 2);
    assert_eq!(
        lake.storage_files(),
        expected,
        "nothing deleted, only moved"
    );
    let left = lake_cli(&lake, &["find-orphans", "--older-than", "0s"]);
    assert_eq!(left.listed(), [stray], "{left:#?}");
    lake_cli(&lake, &["fsck"]).ok();
}

/// The dead letters: how many, how many records, under which flushes.
fn letters_sql() -> &'static str {
    "SELECT count(*), count(DISTINCT topic || '/' || kafka_partition || '/' || kafka_offset), \
     coalesce(string_agg(DISTINCT flush_id, ','), '') FROM lake.main.events_dead_letters"
}

/// One flush: 50 rows (offsets 0..49) and 50 dead letters (offsets
/// 50..99) of partition 0, under `id`.
fn flush_with_dead_letters(id: &str) -> millpond_proto::FlushDescriptor {
    let mut d = descriptor(id, vec![OffsetRange::new("events", 0, 0, 99)], 50);
    d.dead_letters = (50..100)
        .map(|offset| DeadLetter {
            topic: "events".into(),
            partition: 0,
            offset,
            reason: "invalid_json".into(),
            original: format!("{{oops {offset}").into_bytes(),
            ..Default::default()
        })
        .collect();
    d
}

/// A writer killed between writing a flush's files and its COMMIT leaves
/// them in the tables' folders, unregistered; the flush sent again is
/// written under a new flush id. heal-orphans must not register the old
/// dead-letter file (its letters would be there twice) nor any file in
/// Millpond's own tables (here an offsets file, as a larger flush leaves).
async fn heal_orphans_never_registers_dead_letters_twice_or_into_millpond_tables(backend: Backend) {
    let lake = Lake::new(backend, "events");
    let dead = format!("{}main/events_dead_letters/", lake.data_path());
    let mut doomed = Writer::start_with(
        &lake,
        &[("MILLPOND_FAILPOINT", "pause_before_commit:60000")],
    );
    let addr = doomed.addr.clone();
    let pending = tokio::spawn(async move {
        let mut c = client(&addr).await;
        let _ = put(
            &mut c,
            &flush_with_dead_letters("doomed"),
            vec![rows(0, 50)],
        )
        .await;
    });
    let until = Instant::now() + Duration::from_secs(40);
    while lake.files_under(&dead).is_empty() {
        assert!(
            Instant::now() < until,
            "the dead letters were never written"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The files are written; the COMMIT never comes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    doomed.proc.kill9();
    let _ = pending.await;
    // Before the flush is sent again, its records' offsets are not
    // recorded: the pipeline will write those letters itself, so the
    // killed flush's file is not registered either.
    let early = lake_cli(
        &lake,
        &[
            "heal-orphans",
            "--older-than",
            "0s",
            "--table",
            "events_dead_letters",
            "--yes",
        ],
    );
    let early = early.ok();
    assert!(
        early.contains(
            "50 of its 50 dead letters (flush doomed) are at offsets the lake has not recorded"
        ),
        "{early}"
    );
    assert!(early.contains(": 0 to register"), "{early}");
    assert_eq!(lake.query(letters_sql()), ["0|0|"], "no letter registered");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    put(&mut c, &flush_with_dead_letters("again"), vec![rows(0, 50)])
        .await
        .unwrap();
    writer.stop();
    let letters = letters_sql();
    assert_eq!(lake.query(letters), ["50|50|again"]);
    let orphans: Vec<String> = lake.files_under(&dead).into_keys().collect();
    assert_eq!(
        orphans.len(),
        2,
        "the killed flush's file and the resent one's: {orphans:?}"
    );
    // An offsets file the killed writer's transaction would leave: its
    // ranges under its own flush id.
    let offsets = format!(
        "{}main/_millpond_offsets/ducklake-lost.parquet",
        lake.data_path()
    );
    lake.reader()
        .execute_batch(&format!(
            "COPY (SELECT * REPLACE ('doomed' AS flush_id) FROM lake.main._millpond_offsets) TO '{offsets}' (FORMAT parquet)"
        ))
        .unwrap();
    let recorded = lake.query("SELECT * FROM lake.main._millpond_offsets ORDER BY ALL");
    let before = checksum(&lake);

    let run = lake_cli(&lake, &["heal-orphans", "--older-than", "0s", "--yes"]);
    let out = run.ok();
    assert_eq!(
        lake.query(letters),
        ["50|50|again"],
        "every dead letter once"
    );
    assert_eq!(
        lake.query("SELECT * FROM lake.main._millpond_offsets ORDER BY ALL"),
        recorded,
        "the offsets as recorded"
    );
    assert!(
        out.contains("a duplicate: all 50 of its dead letters (flush doomed) are already in main.events_dead_letters under flush again"),
        "{out}"
    );
    assert!(
        out.contains("ducklake-lost.parquet: left in place: a file of Millpond's own table main._millpond_offsets"),
        "{out}"
    );
    assert!(out.contains(" 0 registered"), "{out}");
    assert_eq!(checksum(&lake), before);
    let storage = lake.storage_files();
    assert!(storage.contains_key(&offsets), "left in place");
    assert!(
        orphans.iter().all(|f| storage.contains_key(f)),
        "left in place"
    );
    lake_cli(&lake, &["fsck"]).ok();
}

async fn dedup_deletions_repairs_doubled_deletion_bookkeeping(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 4, 20).await;
    // A delete file on the first file; the second file ended whole, then
    // its snapshots expired: it waits for cleanup.
    lake.execute("DELETE FROM lake.main.events WHERE id < 12");
    lake.execute("DELETE FROM lake.main.events WHERE id >= 20 AND id < 40");
    lake_cli(&lake, &["expire", "--keep-last", "1", "--yes"]).ok();
    let waiting = scheduled(&lake);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let before = checksum(&lake);
    assert!(before[0].starts_with("48|"), "{before:?}");

    // The delete file's row twice; the waiting file scheduled twice; a
    // live file scheduled.
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_delete_file SELECT delete_file_id + 1000, table_id, begin_snapshot, \
         end_snapshot, data_file_id, path, path_is_relative, format, delete_count, file_size_bytes, \
         footer_size, encryption_key, partial_max FROM {META}.ducklake_delete_file WHERE end_snapshot IS NULL"
    ));
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_files_scheduled_for_deletion \
         SELECT * FROM {META}.ducklake_files_scheduled_for_deletion"
    ));
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_files_scheduled_for_deletion \
         SELECT f.data_file_id, 'main/events/' || f.path, true, NOW() FROM {META}.ducklake_data_file f \
         JOIN {META}.ducklake_table t USING (table_id) WHERE t.table_name = 'events' AND f.end_snapshot IS NULL \
         ORDER BY f.data_file_id DESC LIMIT 1"
    ));
    assert_ne!(checksum(&lake), before, "two live delete files miscount");
    assert_eq!(scheduled(&lake).len(), 3);
    let fsck = lake_cli(&lake, &["fsck", "--catalog-only"]);
    assert_eq!(fsck.code, Some(1), "{fsck:#?}");

    let dry = lake_cli(&lake, &["dedup-deletions", "--dry-run"]);
    let out = dry.ok();
    assert!(
        out.contains("1 data files with several live delete files, 3 fixes, 0 left"),
        "{out}"
    );
    assert_eq!(scheduled(&lake).len(), 3);
    let run = lake_cli(&lake, &["dedup-deletions", "--yes"]);
    run.ok();
    assert_eq!(checksum(&lake), before);
    assert_eq!(scheduled(&lake), waiting);
    lake_cli(&lake, &["fsck", "--catalog-only"]).ok();
    let again = lake_cli(&lake, &["dedup-deletions"]);
    assert!(again.ok().contains("0 fixes"), "{again:#?}");
    lake_cli(&lake, &["cleanup", "--older-than", "0s", "--yes"]).ok();
    lake_cli(&lake, &["fsck"]).ok();
    assert_eq!(checksum(&lake), before);
}

/// The catalog's statistics rows, sorted.
fn stats_rows(lake: &Lake) -> Vec<String> {
    let mut rows = Vec::new();
    for t in [
        "ducklake_file_column_stats",
        "ducklake_table_stats",
        "ducklake_table_column_stats",
    ] {
        rows.extend(lake.query(&format!("SELECT '{t}', * FROM {META}.{t}")));
    }
    rows.sort();
    rows
}

async fn purge_orphan_stats_removes_only_orphaned_rows(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 3, 20).await;
    let (before, stats) = (checksum(&lake), stats_rows(&lake));
    // Statistics of files and a table the catalog does not have.
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_file_column_stats SELECT data_file_id + 5000, table_id, column_id, \
         column_size_bytes, value_count, null_count, min_value, max_value, contains_nan, extra_stats \
         FROM {META}.ducklake_file_column_stats"
    ));
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_table_stats SELECT table_id + 5000, record_count, next_row_id, \
         file_size_bytes FROM {META}.ducklake_table_stats"
    ));
    let orphaned = stats_rows(&lake).len() - stats.len();
    assert!(orphaned > 3, "{orphaned}");

    let dry = lake_cli(&lake, &["purge-orphan-stats", "--dry-run"]);
    assert!(
        dry.ok()
            .contains(&format!("{orphaned} orphaned rows (dry run)")),
        "{dry:#?}"
    );
    assert_eq!(stats_rows(&lake).len(), stats.len() + orphaned);
    let run = lake_cli(&lake, &["purge-orphan-stats", "--yes"]);
    assert!(
        run.ok()
            .contains(&format!("removed {orphaned} orphaned rows")),
        "{run:#?}"
    );
    assert_eq!(stats_rows(&lake), stats, "only the orphans went");
    assert_eq!(checksum(&lake), before);
    let again = lake_cli(&lake, &["purge-orphan-stats", "--yes"]);
    assert!(again.ok().contains(": 0 orphaned rows"), "{again:#?}");
    lake_cli(&lake, &["fsck"]).ok();
}

fn partition_values(lake: &Lake) -> Vec<String> {
    let mut rows = lake.query(&format!(
        "SELECT data_file_id, partition_key_index, partition_value FROM {META}.ducklake_file_partition_value"
    ));
    rows.sort();
    rows
}

/// The live file of `parts` holding group `grp`.
fn file_of(lake: &Lake, grp: &str) -> String {
    one(
        lake,
        &format!(
            "SELECT data_file_id FROM {META}.ducklake_file_partition_value \
             WHERE partition_key_index = 0 AND partition_value = '{grp}'"
        ),
    )
}

async fn repair_partition_values_sets_them_from_the_rows(backend: Backend) {
    let lake = Lake::new(backend, "parts");
    std::fs::create_dir_all(lake.dir.path().join("lake")).unwrap();
    lake.execute("CREATE TABLE lake.main.parts (id BIGINT, grp VARCHAR, ts TIMESTAMP)");
    // Written before the table was partitioned: one file, two groups.
    lake.execute(
        "INSERT INTO lake.main.parts SELECT range, 'g' || (range % 2), TIMESTAMP '2023-05-01' FROM range(20)",
    );
    lake.execute("ALTER TABLE lake.main.parts SET PARTITIONED BY (grp, year(ts))");
    let groups = [
        ("a", "2024-01-01 10:00"),
        ("b", "2024-06-01"),
        ("c", "2024-12-31 23:00"),
    ];
    for (i, (grp, ts)) in groups.iter().chain(&groups[..2]).enumerate() {
        lake.execute(&format!(
            "INSERT INTO lake.main.parts SELECT range + {}, '{grp}', TIMESTAMP '{ts}' FROM range(20)",
            (i + 1) * 100
        ));
    }
    let hash = || lake.query("SELECT count(*), sum(hash(id, grp, ts)) FROM lake.main.parts");
    let files = || {
        one(
            &lake,
            "SELECT count(*) FROM ducklake_list_files('lake', 'parts')",
        )
    };
    let (before, values) = (hash(), partition_values(&lake));
    assert_eq!(values.len(), 10, "{values:?}");

    // A file without values, a file of group b recorded as a, a year
    // recorded as the string "null".
    let (a, b, c) = (
        file_of(&lake, "a"),
        file_of(&lake, "b"),
        file_of(&lake, "c"),
    );
    let pv = format!("{META}.ducklake_file_partition_value");
    lake.execute(&format!("DELETE FROM {pv} WHERE data_file_id = {a}"));
    lake.execute(&format!(
        "UPDATE {pv} SET partition_value = 'a' WHERE data_file_id = {b} AND partition_key_index = 0"
    ));
    lake.execute(&format!(
        "UPDATE {pv} SET partition_value = 'null' WHERE data_file_id = {c} AND partition_key_index = 1"
    ));
    let broken = lake_cli(&lake, &["compact", "--table", "parts", "--yes"]);
    assert_eq!(
        broken.code,
        Some(1),
        "compaction trips over the wrong values: {broken:#?}"
    );
    assert_eq!(files(), "6");
    // The mixed file made part of the partitioning: it has no one value.
    let spec = one(
        &lake,
        &format!("SELECT max(partition_id) FROM {META}.ducklake_partition_info"),
    );
    let mixed = |to: &str| {
        lake.execute(&format!(
            "UPDATE {META}.ducklake_data_file SET partition_id = {to} WHERE data_file_id NOT IN \
             (SELECT data_file_id FROM {pv}) AND data_file_id <> {a}"
        ))
    };
    mixed(&spec);

    let dry = lake_cli(&lake, &["repair-partition-values", "--dry-run"]);
    assert_eq!(dry.code, Some(1), "{dry:#?}");
    assert!(
        dry.stdout
            .contains("5 files checked, 4 values to set, 1 files that cannot be fixed"),
        "{dry:#?}"
    );
    assert!(dry.stdout.contains("its rows hold 2 values"), "{dry:#?}");
    assert_eq!(partition_values(&lake).len(), 8);
    let run = lake_cli(&lake, &["repair-partition-values", "--yes"]);
    assert_eq!(run.code, Some(1), "the mixed file stays unfixed: {run:#?}");
    assert_eq!(
        partition_values(&lake),
        values,
        "every value as DuckLake wrote it"
    );
    assert_eq!(hash(), before);
    mixed("NULL");
    let clean = lake_cli(
        &lake,
        &["repair-partition-values", "--table", "parts", "--yes"],
    );
    assert!(
        clean
            .ok()
            .contains("5 files checked, 0 values to set, 0 files"),
        "{clean:#?}"
    );
    lake_cli(&lake, &["compact", "--table", "parts", "--yes"]).ok();
    assert_eq!(files(), "4", "groups a and b merged, each within itself");
    assert_eq!(hash(), before);
    lake_cli(&lake, &["fsck"]).ok();
}

both_backends!(
    heal_orphans_registers_lost_files_and_moves_the_rest_aside,
    heal_orphans_never_registers_dead_letters_twice_or_into_millpond_tables,
    dedup_deletions_repairs_doubled_deletion_bookkeeping,
    purge_orphan_stats_removes_only_orphaned_rows,
    repair_partition_values_sets_them_from_the_rows
);
