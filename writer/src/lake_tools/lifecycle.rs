//! Snapshot and file lifecycle over DuckLake's own functions: expire
//! snapshots, delete the files they no longer need, find and delete files no
//! snapshot knows, flush inlined rows, CHECKPOINT. Each destructive command
//! first runs its function as a dry run and prints what it would do, then
//! confirms and runs it for real.
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use anyhow::bail;

use super::catalog::{as_i64, as_string, meta, Lake, TableRef};
use super::confirm::Ask;
use crate::sink::ducklake::config::{Catalog, EmbeddedFormat};
use crate::sink::ducklake::sql::literal;

/// Which snapshots `expire` removes.
#[derive(Debug, Clone, Copy)]
pub enum Expire {
    OlderThan(Duration),
    /// Everything but the newest N.
    KeepLast(u64),
}

/// Lists at most this many paths in a summary.
const SHOWN: usize = 20;

fn show(verb: &str, paths: &[String], all: bool) {
    println!("{verb} {} files", paths.len());
    let n = if all { paths.len() } else { SHOWN };
    for p in paths.iter().take(n) {
        println!("  {p}");
    }
    if paths.len() > n {
        println!("  ... and {} more", paths.len() - n);
    }
}

fn paths(lake: &Lake, sql: &str) -> anyhow::Result<Vec<String>> {
    Ok(lake.rows(sql)?.iter().map(|r| as_string(&r[0])).collect())
}

/// Returns how many snapshots were (or would be) expired. The snapshots are
/// chosen here (their times compared by DuckDB) and handed to DuckLake by
/// id: DuckLake 1.5.5 compares `older_than` inside the catalog, and on a
/// SQLite catalog that comparison takes every snapshot of the cutoff's day
/// as older, so `--older-than 1h` would expire today's snapshots too.
pub fn expire(lake: &Lake, which: Expire, dry_run: bool, ask: &Ask) -> anyhow::Result<usize> {
    let snapshots = meta("ducklake_snapshot");
    let chosen = match which {
        Expire::OlderThan(age) => format!(
            "AND snapshot_time::TIMESTAMPTZ < {} ORDER BY snapshot_id",
            lake.cutoff(age)?
        ),
        // The newest is left out below, so N - 1 more are kept here.
        Expire::KeepLast(n) => format!("ORDER BY snapshot_id DESC OFFSET {}", n.max(1) - 1),
    };
    // The newest snapshot is the lake's current state: never expired.
    let ids: Vec<String> = lake
        .rows(&format!(
            "SELECT snapshot_id::BIGINT FROM {snapshots} \
             WHERE snapshot_id < (SELECT max(snapshot_id) FROM {snapshots}) {chosen}"
        ))?
        .iter()
        .map(|r| as_i64(&r[0]).to_string())
        .collect();
    if ids.is_empty() {
        println!("expire: nothing to expire");
        return Ok(0);
    }
    let sql = |dry: bool| {
        format!(
            "SELECT snapshot_id::BIGINT, snapshot_time::VARCHAR FROM \
             ducklake_expire_snapshots('lake', dry_run => {dry}, versions => [{}]::UBIGINT[]) ORDER BY 1",
            ids.join(", ")
        )
    };
    let plan = lake.rows(&sql(true))?;
    let describe = |rows: &[Vec<duckdb::types::Value>]| match (rows.first(), rows.last()) {
        (Some(a), Some(b)) => format!(
            " (ids {}..{}, {} .. {})",
            as_i64(&a[0]),
            as_i64(&b[0]),
            as_string(&a[1]),
            as_string(&b[1])
        ),
        _ => String::new(),
    };
    if dry_run || plan.is_empty() {
        println!(
            "expire: would expire {} snapshots{}",
            plan.len(),
            describe(&plan)
        );
        return Ok(plan.len());
    }
    ask.confirm(
        &lake.cfg,
        &format!("expire {} snapshots{}", plan.len(), describe(&plan)),
    )?;
    let done = lake.rows(&sql(false))?;
    println!(
        "expire: expired {} snapshots{}",
        done.len(),
        describe(&done)
    );
    Ok(done.len())
}

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
    if sqlite(lake) {
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
    println!("{waiting}");
    Ok(done.len())
}

fn sqlite(lake: &Lake) -> bool {
    matches!(
        lake.cfg.catalog,
        Catalog::Embedded {
            format: EmbeddedFormat::Sqlite,
            ..
        }
    )
}

/// An embedded catalog inside the data path would look like an orphan.
fn catalog_in_data_path(lake: &Lake) -> Option<String> {
    let Catalog::Embedded { path, .. } = &lake.cfg.catalog else {
        return None;
    };
    let data = Path::new(&lake.cfg.data_path).canonicalize().ok()?;
    let catalog = path.canonicalize().ok()?;
    catalog
        .starts_with(&data)
        .then(|| catalog.display().to_string())
}

/// Files under the data path that no snapshot references and nothing
/// scheduled for deletion, older than `older_than` (younger ones may be a
/// writer's upload that is about to commit).
pub fn find_orphans(lake: &Lake, older_than: Duration) -> anyhow::Result<Vec<String>> {
    let mut found = paths(
        lake,
        &format!(
            "SELECT path FROM ducklake_delete_orphaned_files('lake', dry_run => true, older_than => {}) ORDER BY 1",
            lake.cutoff(older_than)?
        ),
    )?;
    if let Some(catalog) = catalog_in_data_path(lake) {
        // The catalog and its journal files (catalog.sqlite-wal, ...).
        found.retain(|p| {
            !Path::new(p)
                .canonicalize()
                .is_ok_and(|c| c.to_string_lossy().starts_with(&catalog))
        });
        println!("warning: the catalog {catalog} lies inside the data path; it is not an orphan");
    }
    Ok(found)
}

/// Lists orphans; deletes them only with `execute` (and confirmation).
pub fn delete_orphans(
    lake: &Lake,
    older_than: Duration,
    execute: bool,
    ask: &Ask,
) -> anyhow::Result<usize> {
    let plan = find_orphans(lake, older_than)?;
    if !execute || plan.is_empty() {
        show("orphans: found", &plan, true);
        if execute {
            return Ok(0);
        }
        println!("orphans: dry run; pass --execute to delete them");
        return Ok(plan.len());
    }
    if let Some(catalog) = catalog_in_data_path(lake) {
        bail!("the catalog {catalog} lies inside the data path; delete orphans by hand");
    }
    show("orphans: found", &plan, true);
    ask.confirm(
        &lake.cfg,
        &format!(
            "delete {} files no snapshot references, older than {}s",
            plan.len(),
            older_than.as_secs()
        ),
    )?;
    let done = paths(
        lake,
        &format!(
            "SELECT path FROM ducklake_delete_orphaned_files('lake', dry_run => false, older_than => {}) ORDER BY 1",
            lake.cutoff(older_than)?
        ),
    )?;
    show("orphans: deleted", &done, false);
    Ok(done.len())
}

/// Moves inlined rows (small inserts kept in the catalog) into Parquet.
pub fn flush_inlined(lake: &Lake, tables: Option<&[TableRef]>) -> anyhow::Result<i64> {
    let calls: Vec<String> = match tables {
        None => vec!["ducklake_flush_inlined_data('lake')".into()],
        Some(ts) => ts
            .iter()
            .map(|t| {
                format!(
                    "ducklake_flush_inlined_data('lake', schema_name => {}, table_name => {})",
                    literal(&t.schema),
                    literal(&t.name)
                )
            })
            .collect(),
    };
    let mut total = 0;
    for call in calls {
        for r in lake.rows(&format!(
            "SELECT schema_name, table_name, rows_flushed::BIGINT FROM {call}"
        ))? {
            let n = as_i64(&r[2]);
            total += n;
            println!(
                "flush-inlined: {}.{}: {n} rows to Parquet",
                as_string(&r[0]),
                as_string(&r[1])
            );
        }
    }
    println!("flush-inlined: {total} rows in all");
    Ok(total)
}

/// DuckLake's CHECKPOINT: its own chain (flush inlined data, expire
/// snapshots, merge and rewrite files, clean up old files, delete orphans),
/// with the ages the catalog's options set.
pub fn checkpoint(lake: &Lake, ask: &Ask) -> anyhow::Result<()> {
    println!("checkpoint: before: {}", lake.summary()?);
    ask.confirm(
        &lake.cfg,
        "CHECKPOINT the lake (DuckLake's own chain: rewrites files, expires and deletes per the catalog's options)",
    )?;
    lake.exec("CHECKPOINT lake")?;
    println!("checkpoint: after: {}", lake.summary()?);
    Ok(())
}
