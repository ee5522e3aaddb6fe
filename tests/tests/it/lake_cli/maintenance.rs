//! expire-snapshots, cleanup-all, compact-probe and recipe chains.
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::{lake_cli, lake_cli_with, Receiver};
use millpond_tests::scrape::metric;

use super::{checksum, fill, live_files, one, scheduled};

const META: &str = "__ducklake_metadata_lake";

/// Every catalog table's rows, each table's sorted; `schedule_start` (the
/// time of the run) left out. Two catalogs the same run leaves alike
/// compare equal.
fn catalog_dump(lake: &Lake) -> Vec<(String, Vec<String>)> {
    const TABLES: [&str; 27] = [
        "ducklake_metadata",
        "ducklake_snapshot",
        "ducklake_snapshot_changes",
        "ducklake_schema",
        "ducklake_table",
        "ducklake_column",
        "ducklake_column_mapping",
        "ducklake_name_mapping",
        "ducklake_column_tag",
        "ducklake_data_file",
        "ducklake_delete_file",
        "ducklake_file_column_stats",
        "ducklake_file_variant_stats",
        "ducklake_file_partition_value",
        "ducklake_inlined_data_tables",
        "ducklake_macro",
        "ducklake_macro_impl",
        "ducklake_macro_parameters",
        "ducklake_partition_column",
        "ducklake_partition_info",
        "ducklake_schema_versions",
        "ducklake_sort_expression",
        "ducklake_sort_info",
        "ducklake_table_column_stats",
        "ducklake_table_stats",
        "ducklake_tag",
        "ducklake_view",
    ];
    let mut out: Vec<(String, Vec<String>)> = TABLES
        .iter()
        .map(|t| {
            let mut rows = lake.query(&format!("SELECT * FROM {META}.{t}"));
            rows.sort();
            (t.to_string(), rows)
        })
        .collect();
    let mut sched = lake.query(&format!(
        "SELECT data_file_id, path, path_is_relative FROM {META}.ducklake_files_scheduled_for_deletion"
    ));
    sched.sort();
    out.push(("ducklake_files_scheduled_for_deletion".into(), sched));
    out
}

fn catalog_table_exists(lake: &Lake, name: &str) -> bool {
    lake.reader()
        .execute_batch(&format!("SELECT * FROM {META}.\"{name}\" LIMIT 0"))
        .is_ok()
}

fn snapshots(lake: &Lake) -> String {
    one(lake, "SELECT count(*) FROM ducklake_snapshots('lake')")
}

/// The Postgres-native batched expiry leaves the catalog exactly as
/// DuckLake's own expiry leaves a copy of it.
async fn expire_snapshots_does_what_ducklakes_expiry_does(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 6, 20).await;
    // A delete file; a file ended whole; a table dropped with its rows
    // still inlined in the catalog.
    for sql in [
        "DELETE FROM lake.main.events WHERE id >= 20 AND id < 32",
        "DELETE FROM lake.main.events WHERE id < 20",
        "CREATE TABLE lake.main.scratch (x INT)",
        "INSERT INTO lake.main.scratch VALUES (1), (2)",
        "DROP TABLE lake.main.scratch",
    ] {
        lake.execute(sql);
    }
    lake_cli(&lake, &["compact", "--yes"]).ok();
    lake.execute("DELETE FROM lake.main.events WHERE id >= 100 AND id < 112");
    let inlined = lake.query(&format!(
        "SELECT table_name FROM {META}.ducklake_inlined_data_tables"
    ));
    assert!(!inlined.is_empty(), "the dropped table's rows are inlined");
    let before = checksum(&lake);
    let untouched = catalog_dump(&lake);
    let theirs = lake.clone_catalog();
    lake_cli(&theirs, &["expire", "--keep-last", "3", "--yes"]).ok();

    let dry = lake_cli(
        &lake,
        &["expire-snapshots", "--keep-last", "3", "--dry-run"],
    );
    assert!(dry.ok().contains("would expire"), "{dry:#?}");
    assert_eq!(catalog_dump(&lake), untouched, "a dry run changes nothing");
    let refused = lake_cli(&lake, &["expire-snapshots", "--keep-last", "3"]);
    assert!(
        !refused.success() && refused.stdout.contains("target: "),
        "{refused:#?}"
    );

    let run = lake_cli(
        &lake,
        &[
            "expire-snapshots",
            "--keep-last",
            "3",
            "--batch-size",
            "3",
            "--yes",
        ],
    );
    let out = run.ok();
    assert!(out.contains("batch 2/"), "several batches: {out}");
    assert_eq!(snapshots(&lake), "3");
    let (ours, expected) = (catalog_dump(&lake), catalog_dump(&theirs));
    for ((table, a), (_, b)) in ours.iter().zip(&expected) {
        assert_eq!(a, b, "{table} differs from DuckLake's expiry ({backend:?})");
    }
    assert_ne!(ours, untouched);
    for name in &inlined {
        assert_eq!(
            catalog_table_exists(&lake, name),
            catalog_table_exists(&theirs, name),
            "{name}"
        );
    }
    assert!(
        inlined.iter().any(|n| !catalog_table_exists(&lake, n)),
        "the dropped table's inlined rows went: {inlined:?}"
    );
    drop(theirs);
    assert!(!scheduled(&lake).is_empty());
    assert_eq!(checksum(&lake), before);
    lake_cli(&lake, &["cleanup", "--older-than", "0s", "--yes"]).ok();
    assert!(scheduled(&lake).is_empty());
    lake_cli(&lake, &["fsck"]).ok();
    assert_eq!(checksum(&lake), before);
}

async fn cleanup_all_deletes_every_scheduled_file(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 3, 20).await;
    lake_cli(&lake, &["compact", "--yes"]).ok();
    let waiting: Vec<String> = scheduled(&lake)
        .iter()
        .map(|p| format!("{}{p}", lake.data_path()))
        .collect();
    assert_eq!(waiting.len(), 3);
    let storage = lake.storage_files();
    let before = checksum(&lake);

    let safe = lake_cli(&lake, &["--yes", "run", "cleanup-all-safe"]);
    assert!(safe.ok().contains("would delete 0 files"), "{safe:#?}");
    let dry = lake_cli(&lake, &["cleanup-all", "--dry-run"]);
    assert_eq!(dry.listed(), waiting, "{dry:#?}");
    let refused = lake_cli(&lake, &["cleanup-all"]);
    assert!(
        !refused.success() && refused.stdout.contains("target: "),
        "{refused:#?}"
    );
    assert_eq!(lake.storage_files(), storage, "nothing deleted yet");

    lake_cli(&lake, &["cleanup-all", "--yes"]).ok();
    let mut expected = storage.clone();
    for p in &waiting {
        assert!(expected.remove(p).is_some(), "{p} was in storage");
    }
    assert_eq!(
        lake.storage_files(),
        expected,
        "only the scheduled files went"
    );
    assert!(scheduled(&lake).is_empty());
    assert_eq!(checksum(&lake), before);
    lake_cli(&lake, &["fsck"]).ok();
}

/// compact-probe and the tiers' dry runs show the plan, per partition, and
/// change nothing; a tier's run then does what its plan said.
async fn compact_probe_shows_each_tiers_plan(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 6, 20).await;
    lake.execute("CREATE TABLE lake.main.parts (id BIGINT, grp VARCHAR)");
    lake.execute("ALTER TABLE lake.main.parts SET PARTITIONED BY (grp)");
    for (i, grp) in ["a", "b", "a", "b"].iter().enumerate() {
        lake.execute(&format!(
            "INSERT INTO lake.main.parts SELECT range + {}, '{grp}' FROM range(20)",
            i * 100
        ));
    }
    let parts = || {
        one(
            &lake,
            "SELECT count(*) FROM ducklake_list_files('lake', 'parts')",
        )
    };
    assert_eq!(parts(), "4");
    let (files, snaps, before) = (live_files(&lake), snapshots(&lake), checksum(&lake));

    let probe = lake_cli(&lake, &["compact-probe"]);
    let out = probe.ok();
    assert!(out.contains("main.events: 6 files"), "{out}");
    assert!(
        out.contains("main.parts: 4 files") && out.contains("in 2 partitions -> about 2 files"),
        "{out}"
    );
    assert!(
        out.contains("tier 2 (1.0 MiB .. 10.0 MiB): no live files"),
        "{out}"
    );
    let dry = lake_cli(
        &lake,
        &[
            "run",
            "compact-to-tier-1-dry-run",
            "compact-to-tier-2-dry-run",
            "compact-to-tier-3-dry-run",
            "compact-all-tiers-dry-run",
            "compact-probe",
        ],
    );
    assert!(dry.ok().contains("run: 5 steps done"), "{dry:#?}");
    assert_eq!(
        (live_files(&lake), snapshots(&lake)),
        (files, snaps.clone())
    );
    assert_eq!(parts(), "4");

    lake_cli(&lake, &["--yes", "run", "compact-to-tier-2"]).ok();
    assert_eq!((live_files(&lake), snapshots(&lake)), (files, snaps));
    lake_cli(&lake, &["--yes", "run", "compact-to-tier-1"]).ok();
    assert_eq!(live_files(&lake), 1);
    assert_eq!(parts(), "2", "merged within each partition, never across");
    assert_eq!(checksum(&lake), before);
    let after = lake_cli(&lake, &["compact-probe", "--table", "events"]);
    assert!(
        after.ok().contains("main.events: 0 files") && after.stdout.contains("1 files alone"),
        "{after:#?}"
    );
}

/// One flat chain of recipes, as a CronJob runs it: refused without --yes,
/// stopped at the first step that finds a problem, else run through.
async fn recipes_run_as_one_chain(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 4, 20).await;
    let before = checksum(&lake);
    let refused = lake_cli(&lake, &["run", "expire-7d", "compact-all-tiers-default"]);
    assert!(refused.stderr.contains("without --yes"), "{refused:#?}");
    assert_eq!(live_files(&lake), 4);

    // A live file scheduled for deletion: fsck finds it, and the chain
    // stops before compaction.
    lake.execute(&format!(
        "INSERT INTO {META}.ducklake_files_scheduled_for_deletion \
         SELECT data_file_id, 'main/events/' || path, true, NOW() FROM {META}.ducklake_data_file \
         WHERE end_snapshot IS NULL ORDER BY data_file_id LIMIT 1"
    ));
    // Each run reports what it did: its last line, and a push of
    // `millpond_lake_run_*` to MILLPOND_LAKE_REPORT_PUSH_URL.
    let receiver = Receiver::start(200);
    let report_url = format!(
        "{}/metrics/job/millpond-lake/schedule/nightly",
        receiver.url
    );
    let report = [("MILLPOND_LAKE_REPORT_PUSH_URL", report_url.as_str())];
    let stopped = lake_cli_with(
        &lake,
        &report,
        &["--yes", "run", "fsck", "compact-all-tiers-default"],
    );
    assert_eq!(stopped.code, Some(1), "{stopped:#?}");
    assert!(
        stopped.stdout.contains("run: stopped at fsck"),
        "{stopped:#?}"
    );
    assert_eq!(live_files(&lake), 4, "compaction did not run");
    let last = stopped.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("millpond-lake run: found problems at fsck after "),
        "{stopped:#?}"
    );
    let pushed = receiver.next();
    assert_eq!(pushed.path, "/metrics/job/millpond-lake/schedule/nightly");
    let body = &pushed.body;
    assert_eq!(
        metric(body, "millpond_lake_run_success", &[("command", "run")]),
        Some(0.0),
        "{body}"
    );
    assert_eq!(
        metric(body, "millpond_lake_run_failed_step", &[("step", "fsck")]),
        Some(1.0),
        "{body}"
    );
    assert!(
        metric(body, "millpond_lake_run_duration_seconds", &[]).is_some_and(|s| s > 0.0),
        "{body}"
    );

    let chain = [
        "dedup-deletions",
        "flush-inlined",
        "expire-7d",
        "compact-all-tiers-default",
        "cleanup-all-safe",
        "fsck",
        "metrics-once",
    ];
    let run = lake_cli_with(
        &lake,
        &report,
        &[&["--yes", "run"][..], &chain[..]].concat(),
    );
    let out = run.ok();
    assert!(out.contains("run: 7 steps done"), "{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("millpond-lake run: done after ")
            && last.contains("files_compacted_away=3"),
        "{out}"
    );
    let body = receiver.next().body;
    assert_eq!(
        metric(&body, "millpond_lake_run_success", &[]),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        metric(
            &body,
            "millpond_lake_run_done",
            &[("what", "files_compacted_away")]
        ),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        metric(&body, "millpond_lake_run_failed_step", &[]),
        None,
        "{body}"
    );
    assert!(out.contains("expire: nothing to expire"), "{out}");
    assert!(
        out.contains("millpond_lake_data_files"),
        "metrics-once printed: {out}"
    );
    assert_eq!(live_files(&lake), 1);
    assert_eq!(scheduled(&lake).len(), 4, "young merged files wait");
    assert_eq!(checksum(&lake), before);
}

both_backends!(
    expire_snapshots_does_what_ducklakes_expiry_does,
    cleanup_all_deletes_every_scheduled_file,
    compact_probe_shows_each_tiers_plan,
    recipes_run_as_one_chain
);
