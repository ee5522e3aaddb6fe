//! purge-orphan-stats: statistics and partition values left behind for
//! files and tables the catalog no longer has (a run of an older DuckLake
//! killed half-way, a hand-made catalog edit). Nothing reads them, but they
//! grow the catalog, and a later file given the same id would inherit a
//! stranger's statistics, which DuckLake uses to skip files in a query.
use super::catalog::Lake;
use super::confirm::Ask;
use super::native::CatalogSql;

/// (catalog table, its key, the table that must hold the key, what it is).
const KEPT_FOR: [(&str, &str, &str, &str); 5] = [
    (
        "ducklake_file_column_stats",
        "data_file_id",
        "ducklake_data_file",
        "file column statistics",
    ),
    (
        "ducklake_file_variant_stats",
        "data_file_id",
        "ducklake_data_file",
        "file variant statistics",
    ),
    (
        "ducklake_file_partition_value",
        "data_file_id",
        "ducklake_data_file",
        "file partition values",
    ),
    (
        "ducklake_table_stats",
        "table_id",
        "ducklake_table",
        "table statistics",
    ),
    (
        "ducklake_table_column_stats",
        "table_id",
        "ducklake_table",
        "table column statistics",
    ),
];

fn orphaned(m: &str, table: &str, key: &str, owner: &str) -> String {
    format!(
        "{m}{table} WHERE NOT EXISTS (SELECT 1 FROM {m}{owner} o WHERE o.{key} = {table}.{key})"
    )
}

/// Returns how many rows were (or would be) removed.
pub fn purge_orphan_stats(lake: &Lake, dry_run: bool, ask: &Ask) -> anyhow::Result<i64> {
    let sql = CatalogSql::new(lake);
    let m = sql.m();
    let mut found = Vec::new();
    for (table, key, owner, what) in KEPT_FOR {
        let n = sql.int(&format!(
            "SELECT count(*) FROM {}",
            orphaned(&m, table, key, owner)
        ))?;
        println!("purge-orphan-stats: {n} rows of {what} ({table}) belong to no {owner} row");
        if n > 0 {
            found.push((table, key, owner, n));
        }
    }
    let total: i64 = found.iter().map(|f| f.3).sum();
    if dry_run || total == 0 {
        println!(
            "purge-orphan-stats: {total} orphaned rows{}",
            if dry_run { " (dry run)" } else { "" }
        );
        return Ok(total);
    }
    ask.confirm(
        &lake.cfg,
        &format!("delete {total} catalog rows of statistics and partition values whose file or table is gone"),
    )?;
    let statements: Vec<String> = found
        .iter()
        .map(|(table, key, owner, _)| format!("DELETE FROM {}", orphaned(&m, table, key, owner)))
        .collect();
    sql.atomic(&statements)?;
    println!("purge-orphan-stats: removed {total} orphaned rows");
    crate::report::add(crate::report::what::STATS_ROWS_PURGED, total.max(0) as u64);
    Ok(total)
}
