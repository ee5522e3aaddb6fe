//! Snapshot and file lifecycle over DuckLake's own functions: flush inlined
//! rows and CHECKPOINT here; expiry, cleanup and orphans in their own
//! files. Each destructive command first runs its function as a dry run and
//! prints what it would do, then confirms and runs it for real.
use super::catalog::{as_i64, as_string, Lake, TableRef};
use super::confirm::Ask;
use millpond_writer::lake_api::literal;

/// Lists at most this many paths in a summary.
const SHOWN: usize = 20;

pub(super) fn show(verb: &str, paths: &[String], all: bool) {
    println!("{verb} {} files", paths.len());
    let n = if all { paths.len() } else { SHOWN };
    for p in paths.iter().take(n) {
        println!("  {p}");
    }
    if paths.len() > n {
        println!("  ... and {} more", paths.len() - n);
    }
}

pub(super) fn paths(lake: &Lake, sql: &str) -> anyhow::Result<Vec<String>> {
    Ok(lake.rows(sql)?.iter().map(|r| as_string(&r[0])).collect())
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
    crate::report::add(
        crate::report::what::INLINED_ROWS_FLUSHED,
        total.max(0) as u64,
    );
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
