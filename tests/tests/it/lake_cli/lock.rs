//! The maintenance lock: one changing run at a time per catalog. A real
//! run holds it (paused by a failpoint right after taking it) while others
//! start: one with a short wait gives up naming it, read-only commands run
//! beside it, and one with a longer wait runs once it is released.
use std::time::{Duration, Instant};

use millpond_tests::lake::{Backend, Lake};
use millpond_tests::lake_cli::{lake_cli, lake_cli_with, spawn_lake_cli, Run};

use super::fill;

/// Whether a run holds the catalog's lock now.
fn held(lake: &Lake) -> bool {
    match lake.backend {
        Backend::PostgresS3 => {
            lake.catalog_psql(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            ) != "0"
        }
        _ => {
            let dir = lake.env_value("MILLPOND_LAKE_DIR").unwrap();
            let file = format!("{dir}/catalog.sqlite.millpond-lake.lock");
            std::fs::read_to_string(file).is_ok_and(|t| !t.is_empty())
        }
    }
}

async fn a_second_run_waits_for_the_lock_or_names_its_holder(backend: Backend) {
    let lake = Lake::new(backend, "events");
    fill(&lake, 2, 20).await;
    let hold = ("MILLPOND_FAILPOINT", "pause_holding_lake_lock:8000");
    let holder = spawn_lake_cli(&lake, &[hold], &["expire", "--keep-last", "100", "--yes"]);
    let pid = holder.id();
    let until = Instant::now() + Duration::from_secs(30);
    while !held(&lake) {
        assert!(Instant::now() < until, "the holder never took the lock");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A short wait gives up, naming the run that holds the lock.
    let started = Instant::now();
    let refused = lake_cli(&lake, &["--lock-wait", "1s", "cleanup", "--yes"]);
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited");
    let e = &refused.stderr;
    assert!(
        e.contains("another run holds the maintenance lock of")
            && e.contains("millpond-lake expire")
            && e.contains(&pid.to_string())
            && e.contains("since "),
        "{refused:#?}"
    );
    if backend == Backend::PostgresS3 {
        assert!(e.contains("Postgres pid ") && e.contains("from "), "{e}");
    } else {
        assert!(e.contains(&format!("pid {pid}")), "{e}");
    }
    assert!(
        !refused.stdout.lines().any(|l| l.starts_with("cleanup:"))
            && refused
                .stdout
                .contains("millpond-lake cleanup: failed at cleanup"),
        "it did nothing: {refused:#?}"
    );
    // A chain with a changing step takes it too; the env sets the wait.
    let chain = lake_cli_with(
        &lake,
        &[("MILLPOND_LAKE_LOCK_WAIT", "0s")],
        &["--yes", "run", "fsck", "expire-7d"],
    );
    assert_eq!(chain.code, Some(1), "{chain:#?}");
    assert!(chain.stderr.contains("millpond-lake expire"), "{chain:#?}");
    assert!(
        !chain.stdout.contains("step 1/2"),
        "no step ran: {chain:#?}"
    );
    // Commands that only read take no lock.
    lake_cli(&lake, &["--lock-wait", "0s", "fsck", "--catalog-only"]).ok();
    lake_cli(
        &lake,
        &["--lock-wait", "0s", "run", "compact-probe", "fsck"],
    )
    .ok();
    lake_cli(&lake, &["--lock-wait", "0s", "compact", "--dry-run"]).ok();

    // A longer wait runs once the holder is done, never beside it: each
    // end is timed as it happens.
    let patient = spawn_lake_cli(&lake, &[], &["--lock-wait", "60s", "cleanup", "--yes"]);
    let ended = |child: std::process::Child| {
        std::thread::spawn(move || {
            let out = child.wait_with_output().unwrap();
            (Instant::now(), Run::from(out))
        })
    };
    let (holder, patient) = (ended(holder), ended(patient));
    let (holder_done, holder) = holder.join().unwrap();
    let (patient_done, patient) = patient.join().unwrap();
    holder.ok();
    patient.ok();
    assert!(
        patient
            .stderr
            .contains("waiting up to 60 s for the maintenance lock")
            && patient.stderr.contains("millpond-lake expire"),
        "{patient:#?}"
    );
    assert!(
        patient_done > holder_done,
        "the waiting run ran after the holder, not beside it"
    );
    assert!(!held(&lake), "both released it");
    // Free again: no wait at all.
    lake_cli(&lake, &["--lock-wait", "0s", "cleanup", "--yes"]).ok();
}

both_backends!(a_second_run_waits_for_the_lock_or_names_its_holder);
