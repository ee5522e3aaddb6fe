//! Partition retention: `list-droppable-partitions` and `drop-partitions`.
//!
//! A partition is dropped when the whole span of time its calendar keys
//! name ([`spec`]) ended before now minus the retention, and each of its
//! files agrees: the file's column statistics say its newest time is inside
//! that span, with no NULL time. A file whose statistics are missing or
//! disagree (wrong partition values: `repair-partition-values` fixes those)
//! is left and reported, so a row inside the retention is never dropped on
//! the catalog's word alone.
//!
//! Never a partition a live writer may still write: the partition being
//! written now ends in the future, and the retention is at least an hour
//! ([`MIN_RETENTION`]), which keeps clear of a flush in flight and of a
//! writer whose clock runs behind. A late event for a dropped span (an
//! event-time key) lands in a new file after the drop and stays until the
//! next run; rows inside the retention are never touched.
//!
//! The drop ends the partitions' files in one new snapshot, written in the
//! catalog's own transaction, as DuckLake ends a file whose rows are all
//! deleted ([`drop`]). It reads no data file, so it takes milliseconds
//! whatever the partitions hold, and cannot be starved by writers
//! committing meanwhile (a DuckDB `DELETE` reads every file it deletes from
//! and is refused when any writer commits to the table while it runs). The
//! snapshot says `deleted_from_table`, so a writer or a compaction whose
//! transaction began before it is refused by DuckLake and runs again: a
//! compaction can never carry dropped rows into a new file. The files stay
//! readable by older snapshots until those expire; `cleanup` then deletes
//! them.
mod drop;
mod plan;
pub mod spec;

use std::time::Duration;

use anyhow::bail;

use super::catalog::{Lake, TableRef};
use super::confirm::Ask;
use super::units::bytes;
pub use plan::Plan;

/// The shortest retention taken (see the module's comment).
pub const MIN_RETENTION: Duration = Duration::from_secs(3600);

/// `--older-than` / MILLPOND_LAKE_RETENTION checked against
/// [`MIN_RETENTION`].
pub fn check_retention(age: Duration) -> Result<Duration, String> {
    if age < MIN_RETENTION {
        return Err(format!(
            "a retention under 1h could drop a partition a writer is still writing \
             (a flush in flight, a clock behind); got {}s",
            age.as_secs()
        ));
    }
    Ok(age)
}

/// What the commands work on: one table and a retention.
pub struct Target {
    pub table: TableRef,
    pub age: Duration,
}

/// The table and retention of a command: its flags, else DUCKLAKE_TABLE and
/// MILLPOND_LAKE_RETENTION (each retention already checked where it was
/// parsed).
pub fn target(
    lake: &Lake,
    table: Option<&str>,
    older_than: Option<Duration>,
    default_table: Option<&str>,
    default_age: Option<Duration>,
    schema: &str,
) -> anyhow::Result<Target> {
    let Some(name) = table.or(default_table) else {
        bail!("which table? give --table, or set DUCKLAKE_TABLE (the chart sets it for each pipeline)");
    };
    let Some(age) = older_than.or(default_age) else {
        bail!(
            "what retention? give --older-than (e.g. 90d), or set MILLPOND_LAKE_RETENTION (the chart's maintenance.retention)"
        );
    };
    let mut tables = lake.select_tables(Some(name), schema)?;
    Ok(Target {
        table: tables.remove(0),
        age,
    })
}

fn show(plan: &Plan) {
    println!(
        "{}: partitioned by {} of {} ({}); retention {}: partitions that ended by {} UTC",
        plan.table.qualified(),
        plan.keys
            .fields
            .iter()
            .map(|(u, _)| u.name())
            .collect::<Vec<_>>()
            .join(", "),
        plan.keys.column,
        plan.keys.column_type,
        humantime(plan.age),
        plan.cutoff.format("%Y-%m-%d %H:%M:%S"),
    );
    for p in &plan.droppable {
        println!(
            "  {}  {} to {}  {} files  {} rows  {}",
            p.label,
            p.start.format("%Y-%m-%d %H:%M"),
            p.end.format("%Y-%m-%d %H:%M"),
            p.files.len(),
            p.rows,
            bytes(p.bytes)
        );
    }
    for why in &plan.left {
        println!("  left: {why}");
    }
    println!(
        "droppable: {} partitions, {} files, {} rows, {}; kept: {} partitions",
        plan.droppable.len(),
        plan.files().len(),
        plan.droppable.iter().map(|p| p.rows).sum::<i64>(),
        bytes(plan.droppable.iter().map(|p| p.bytes).sum()),
        plan.kept
    );
    if plan.other_files > 0 {
        println!(
            "  not judged: {} files written under another partitioning of the table (older \
             snapshots' keys); drop their rows with a DELETE if they are past the retention",
            plan.other_files
        );
    }
}

fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s => format!("{s}s"),
    }
}

/// `list-droppable-partitions`. Ok(false): some file was left because its
/// statistics disagree with its partition.
pub fn list(lake: &Lake, target: &Target) -> anyhow::Result<bool> {
    let plan = Plan::read(lake, &target.table, target.age)?;
    show(&plan);
    Ok(plan.left.is_empty())
}

/// `drop-partitions`: a dry run unless `execute`. Rows the catalog holds
/// inline are first moved into files, so that they are judged like any
/// other.
pub fn drop_partitions(
    lake: &Lake,
    target: &Target,
    execute: bool,
    ask: &Ask,
) -> anyhow::Result<bool> {
    if execute {
        // A table whose partitions are not spans of time is refused before
        // anything changes.
        Plan::read(lake, &target.table, target.age)?;
        super::lifecycle::flush_inlined(lake, Some(std::slice::from_ref(&target.table)))?;
    }
    let plan = Plan::read(lake, &target.table, target.age)?;
    show(&plan);
    if plan.droppable.is_empty() {
        println!("drop-partitions: nothing to drop");
        return Ok(plan.left.is_empty());
    }
    if !execute {
        println!("drop-partitions: dry run, nothing dropped (--execute drops them)");
        return Ok(plan.left.is_empty());
    }
    ask.confirm(
        &lake.cfg,
        &format!(
            "drop {} partitions ({} files) of {} that ended before {} UTC",
            plan.droppable.len(),
            plan.files().len(),
            plan.table.qualified(),
            plan.cutoff.format("%Y-%m-%d %H:%M:%S")
        ),
    )?;
    let done = drop::end_files(lake, &plan)?;
    crate::report::add(
        crate::report::what::PARTITIONS_DROPPED,
        plan.droppable.len() as u64,
    );
    crate::report::add(crate::report::what::ROWS_DROPPED, done.rows as u64);
    println!(
        "drop-partitions: dropped {} partitions of {} in snapshot {}: {} files, {} rows; their \
         files are deleted by cleanup once the snapshots before it expire",
        plan.droppable.len(),
        plan.table.qualified(),
        done.snapshot,
        done.files,
        done.rows
    );
    Ok(plan.left.is_empty())
}
