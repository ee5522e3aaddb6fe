//! cleanup: delete the files expiry and compaction scheduled for deletion.
use std::collections::HashSet;
use std::time::Duration;

use anyhow::bail;

use super::catalog::{as_string, meta, Lake};
use super::confirm::Ask;
use super::lifecycle::{paths, show};
use millpond_writer::lake_api::literal;

/// Deletes files scheduled for deletion at least `older_than` ago; returns
/// how many.
///
/// DuckLake's cleanup takes only a cutoff, which it compares inside the
/// catalog; on a SQLite catalog (1.5.5) that counts a same-day cutoff as
/// later than every file scheduled that day. So the files old enough are
/// worked out here, and DuckLake runs only with a cutoff whose dry run names
/// none but those: the exact one, else (SQLite) the end of the day before
/// it, which it compares right (younger files wait for a later run).
pub fn cleanup(
    lake: &Lake,
    older_than: Duration,
    dry_run: bool,
    ask: &Ask,
) -> anyhow::Result<usize> {
    let cutoff = lake.cutoff(older_than)?;
    let data_path = lake.data_path()?;
    let old_enough: HashSet<String> = paths(
        lake,
        &format!(
            "SELECT CASE WHEN coalesce(CAST(path_is_relative AS BOOLEAN), true) THEN {} || path ELSE path END \
             FROM {} WHERE schedule_start::TIMESTAMPTZ < {cutoff}",
            literal(&data_path),
            meta("ducklake_files_scheduled_for_deletion")
        ),
    )?
    .into_iter()
    .collect();
    // The exact cutoff first; on a SQLite catalog, if DuckLake would take
    // too much with it, the end of the day before, which it compares right.
    let mut tries = vec![cutoff.clone()];
    if lake.is_sqlite() {
        let rows = lake.rows(&format!(
            "SELECT (date_trunc('day', {cutoff}) - INTERVAL 1 MICROSECOND)::VARCHAR"
        ))?;
        tries.push(format!("TIMESTAMPTZ {}", literal(&as_string(&rows[0][0]))));
    }
    let sql = |dry: bool, arg: &str| {
        format!(
            "SELECT path FROM ducklake_cleanup_old_files('lake', dry_run => {dry}, older_than => {arg}) ORDER BY 1"
        )
    };
    let mut chosen = None;
    let mut too_young = Vec::new();
    for arg in &tries {
        let plan = paths(lake, &sql(true, arg))?;
        too_young = plan
            .iter()
            .filter(|p| !old_enough.contains(*p))
            .cloned()
            .collect();
        if too_young.is_empty() {
            chosen = Some((arg, plan));
            break;
        }
    }
    let Some((arg, plan)) = chosen else {
        bail!(
            "DuckLake's cleanup would delete {} files scheduled less than {}s ago (e.g. {}); refusing",
            too_young.len(),
            older_than.as_secs(),
            too_young[0]
        );
    };
    let pending = lake.int(&format!(
        "SELECT count(*) FROM {}",
        meta("ducklake_files_scheduled_for_deletion")
    ))?;
    let waiting = format!(
        "cleanup: {} scheduled files stay (younger than the safety age{})",
        pending - plan.len() as i64,
        if arg != &cutoff {
            ", or scheduled since the start of the cutoff's day: a SQLite catalog compares no finer"
        } else {
            ""
        }
    );
    if dry_run || plan.is_empty() {
        show("cleanup: would delete", &plan, dry_run);
        println!("{waiting}");
        return Ok(plan.len());
    }
    ask.confirm(
        &lake.cfg,
        &format!(
            "delete {} files scheduled for deletion more than {}s ago",
            plan.len(),
            older_than.as_secs()
        ),
    )?;
    let done = paths(lake, &sql(false, arg))?;
    show("cleanup: deleted", &done, false);
    crate::report::add(crate::report::what::FILES_DELETED, done.len() as u64);
    println!("{waiting}");
    Ok(done.len())
}

/// Deletes every file scheduled for deletion, however recently (DuckLake's
/// `cleanup_all`): for a lake no reader is reading, or after the files'
/// last readers are known to be done. Returns how many.
pub fn cleanup_all(lake: &Lake, dry_run: bool, ask: &Ask) -> anyhow::Result<usize> {
    let sql = |dry: bool| {
        format!(
            "SELECT path FROM ducklake_cleanup_old_files('lake', dry_run => {dry}, cleanup_all => true) ORDER BY 1"
        )
    };
    let plan = paths(lake, &sql(true))?;
    if dry_run || plan.is_empty() {
        show("cleanup-all: would delete", &plan, dry_run);
        return Ok(plan.len());
    }
    show("cleanup-all: would delete", &plan, false);
    ask.confirm(
        &lake.cfg,
        &format!(
            "delete all {} files scheduled for deletion, however recently (a reader of an expired snapshot may still need one)",
            plan.len()
        ),
    )?;
    let done = paths(lake, &sql(false))?;
    show("cleanup-all: deleted", &done, false);
    crate::report::add(crate::report::what::FILES_DELETED, done.len() as u64);
    Ok(done.len())
}
