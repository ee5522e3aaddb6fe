//! heal-orphans: files in a table's folder that no catalog row references
//! (a commit lost after the upload, a catalog edit that dropped a file's
//! rows). A Parquet file whose columns fit the table and none of whose rows
//! the table already holds is registered again with
//! `ducklake_add_data_files`; any other is moved aside to the quarantine
//! folder, outside the data path, under the same relative path. Nothing is
//! deleted. Files outside every table's folder are only counted.
use std::time::Duration;

use anyhow::bail;

use super::catalog::{as_i64, as_string, Lake, TableRef};
use super::confirm::Ask;
use super::native::CatalogSql;
use super::orphans::find_orphans;
use super::storage::Storage;
use millpond_writer::lake_api::{ident, literal};

/// The column every Millpond row gets when written: a rewrite of the same
/// records differs there, so it is left out when looking for them.
const WRITE_TIME: &str = "_inserted_at";

enum Verdict {
    Register { rows: i64 },
    Quarantine { why: String },
}

/// Where a table's files live: its folder, ending in `/`.
fn folders(
    lake: &Lake,
    tables: &[TableRef],
    data_path: &str,
) -> anyhow::Result<Vec<(TableRef, String)>> {
    let sql = CatalogSql::new(lake);
    let m = sql.m();
    let rows = sql.rows(&format!(
        "SELECT f.table_id, {} FROM (SELECT DISTINCT table_id, '' AS path, true AS path_is_relative \
         FROM {m}ducklake_table WHERE end_snapshot IS NULL) f",
        sql.full_path("f", data_path)
    ))?;
    Ok(tables
        .iter()
        .filter_map(|t| {
            let r = rows.iter().find(|r| as_i64(&r[0]) == t.id)?;
            let mut folder = as_string(&r[1]);
            if !folder.ends_with('/') {
                folder.push('/');
            }
            Some((t.clone(), folder))
        })
        .collect())
}

/// (name, type) of each column of a query's result.
fn columns(lake: &Lake, from: &str) -> anyhow::Result<Vec<(String, String)>> {
    Ok(lake
        .rows(&format!("DESCRIBE SELECT * FROM {from}"))?
        .iter()
        .map(|r| (as_string(&r[0]), as_string(&r[1])))
        .collect())
}

fn judge(lake: &Lake, table: &TableRef, path: &str) -> Verdict {
    let quarantine = |why: String| Verdict::Quarantine { why };
    let file = format!("read_parquet({})", literal(path));
    let Ok(have) = columns(lake, &file) else {
        return quarantine("not a Parquet file DuckDB can read".into());
    };
    let want = match columns(lake, &table.sql()) {
        Ok(w) => w,
        Err(e) => return quarantine(format!("reading the table's columns: {e:#}")),
    };
    let misfits: Vec<String> = have
        .iter()
        .filter(|c| !want.contains(c))
        .map(|(n, t)| format!("{n} {t}"))
        .collect();
    if !misfits.is_empty() {
        return quarantine(format!(
            "columns the table does not have (or with another type): {}",
            misfits.join(", ")
        ));
    }
    let compared: Vec<String> = have
        .iter()
        .filter(|(n, _)| n != WRITE_TIME)
        .map(|(n, _)| ident(n))
        .collect();
    let cols = compared.join(", ");
    let counts = lake.rows(&format!(
        "SELECT (SELECT count(*) FROM {file}), \
         (SELECT count(*) FROM (SELECT {cols} FROM {file} INTERSECT SELECT {cols} FROM {}))",
        table.sql()
    ));
    match counts.as_deref() {
        Ok([r, ..]) => match (as_i64(&r[0]), as_i64(&r[1])) {
            (0, _) => quarantine("it holds no rows".into()),
            (rows, 0) => Verdict::Register { rows },
            (rows, dup) => quarantine(format!("{dup} of its {rows} rows are already in the table")),
        },
        Ok([]) => quarantine("no answer comparing its rows".into()),
        Err(e) => quarantine(format!("comparing its rows with the table's: {e:#}")),
    }
}

/// Where quarantined files go: `--quarantine`, or beside the data path
/// (`<data path>-quarantine/`), never under it (orphan deletion would
/// take them).
fn quarantine_root(data_path: &str, chosen: Option<&str>) -> anyhow::Result<String> {
    let trimmed = data_path.trim_end_matches('/');
    let mut root = match chosen {
        Some(q) => q.to_owned(),
        None if trimmed.matches('/').count() <= 2 && trimmed.starts_with("s3://") => {
            bail!("the data path {data_path} is a bucket's root: name a folder outside it with --quarantine")
        }
        None => format!("{trimmed}-quarantine"),
    };
    if !root.ends_with('/') {
        root.push('/');
    }
    if root.starts_with(data_path) {
        bail!("--quarantine {root} lies inside the data path {data_path}: orphan deletion would delete it");
    }
    let bucket = |p: &str| {
        p.strip_prefix("s3://")
            .map(|r| r.split('/').next().unwrap_or("").to_owned())
    };
    if bucket(&root) != bucket(data_path) {
        bail!("--quarantine {root} must be in the same storage (and bucket) as the data path {data_path}");
    }
    Ok(root)
}

/// Ok(false): a file could be neither registered nor moved.
pub fn heal_orphans(
    lake: &Lake,
    tables: &[TableRef],
    older_than: Duration,
    quarantine: Option<&str>,
    dry_run: bool,
    ask: &Ask,
) -> anyhow::Result<bool> {
    let data_path = lake.data_path()?;
    let root = quarantine_root(&data_path, quarantine)?;
    let folders = folders(lake, tables, &data_path)?;
    let mut plan = Vec::new();
    let mut outside = 0;
    for path in find_orphans(lake, older_than)? {
        let owner = folders
            .iter()
            .filter(|(_, f)| path.starts_with(f.as_str()))
            .max_by_key(|(_, f)| f.len());
        let Some((table, _)) = owner else {
            outside += 1;
            continue;
        };
        let verdict = judge(lake, table, &path);
        match &verdict {
            Verdict::Register { rows } => {
                println!(
                    "heal-orphans: {path}: register in {} ({rows} rows)",
                    table.qualified()
                )
            }
            Verdict::Quarantine { why } => println!("heal-orphans: {path}: move aside: {why}"),
        }
        plan.push((table.clone(), path, verdict));
    }
    let registering = plan
        .iter()
        .filter(|p| matches!(p.2, Verdict::Register { .. }))
        .count();
    let summary = format!(
        "{} orphaned files in the tables' folders: {registering} to register, {} to move to {root}; {outside} elsewhere (outside the tables' folders) left alone",
        plan.len(),
        plan.len() - registering
    );
    if dry_run || plan.is_empty() {
        println!(
            "heal-orphans: {summary}{}",
            if dry_run { " (dry run)" } else { "" }
        );
        return Ok(true);
    }
    ask.confirm(&lake.cfg, &format!("heal orphans: {summary}"))?;
    let storage = Storage::for_lake(&lake.cfg)?;
    let (mut registered, mut moved, mut failed) = (0, 0, 0);
    for (table, path, verdict) in &plan {
        let done = match verdict {
            Verdict::Register { .. } => lake
                .exec(&format!(
                    "CALL ducklake_add_data_files('lake', {}, {}, schema => {}, allow_missing => true)",
                    literal(&table.name),
                    literal(path),
                    literal(&table.schema)
                ))
                .map(|_| registered += 1),
            Verdict::Quarantine { .. } => {
                let to = format!("{root}{}", path.strip_prefix(data_path.as_str()).unwrap_or(path));
                storage.move_file(path, &to).map(|_| moved += 1)
            }
        };
        if let Err(e) = done {
            println!("heal-orphans: {path}: failed: {e:#}");
            failed += 1;
        }
    }
    println!("heal-orphans: {registered} registered, {moved} moved to {root}, {failed} failed");
    Ok(failed == 0)
}
