//! dedup-deletions: deletion bookkeeping the catalog holds twice.
//!
//! - More than one live delete file for one data file. DuckLake reads one
//!   delete file per data file and replaces it on the next delete, so two
//!   live ones make a count wrong. The newest whose deleted rows include
//!   all the others' stays (of copies, the lowest id); an older one ends where it began (as DuckLake would
//!   have ended it), a row naming the same file goes, a newer distinct file
//!   goes and is scheduled for deletion. When none includes all the others'
//!   rows the group is reported and left as it is.
//! - A path scheduled for deletion more than once: one row stays (the
//!   earliest), so cleanup deletes the file once.
//! - A path scheduled for deletion that a data or delete file row still
//!   references: cleanup would delete a file the lake reads, so it is taken
//!   off the schedule.
use std::collections::BTreeSet;

use super::catalog::{as_i64, as_string, Lake};
use super::confirm::Ask;
use super::native::CatalogSql;
use millpond_writer::lake_api::literal;

/// A live delete file of a data file that has more than one.
struct DeleteFile {
    id: i64,
    data_file: i64,
    begin: i64,
    path: String,
    format: String,
}

/// What one run found: the fixes as SQL, and the groups it could not fix.
#[derive(Default)]
struct Fixes {
    statements: Vec<String>,
    described: Vec<String>,
    unfixable: Vec<String>,
}

fn live_duplicates(sql: &CatalogSql, data_path: &str) -> anyhow::Result<Vec<DeleteFile>> {
    let m = sql.m();
    let rows = sql.rows(&format!(
        "SELECT x.delete_file_id, x.data_file_id, x.begin_snapshot, {}, x.format FROM {m}ducklake_delete_file x \
         WHERE x.end_snapshot IS NULL AND x.data_file_id IN (SELECT data_file_id FROM {m}ducklake_delete_file \
         WHERE end_snapshot IS NULL GROUP BY data_file_id HAVING count(*) > 1) ORDER BY 2, 3, 1",
        sql.full_path("x", data_path)
    ))?;
    Ok(rows
        .iter()
        .map(|r| DeleteFile {
            id: as_i64(&r[0]),
            data_file: as_i64(&r[1]),
            begin: as_i64(&r[2]),
            path: as_string(&r[3]),
            format: as_string(&r[4]),
        })
        .collect())
}

fn positions(lake: &Lake, f: &DeleteFile) -> anyhow::Result<BTreeSet<i64>> {
    Ok(lake
        .rows(&format!(
            "SELECT pos::BIGINT FROM read_parquet({})",
            literal(&f.path)
        ))?
        .iter()
        .map(|r| as_i64(&r[0]))
        .collect())
}

/// One data file's live delete files: keep the newest that holds every
/// deleted row, retire the rest.
fn fix_group(
    lake: &Lake,
    sql: &CatalogSql,
    group: &[DeleteFile],
    fixes: &mut Fixes,
) -> anyhow::Result<()> {
    let m = sql.m();
    let data_path = lake.data_path()?;
    let mut sets = Vec::new();
    for f in group {
        if f.format != "parquet" {
            fixes.unfixable.push(format!(
                "data file id {}: delete file {} is {}, not parquet",
                f.data_file, f.path, f.format
            ));
            return Ok(());
        }
        sets.push(positions(lake, f)?);
    }
    let all: BTreeSet<i64> = sets.iter().flatten().copied().collect();
    // The newest holding every row; of copies, the first (lowest id):
    // DuckLake hands out ids in order, and a copy's id may be one it has
    // yet to give.
    let keep = (0..group.len())
        .filter(|&i| sets[i] == all)
        .max_by_key(|&i| (group[i].begin, std::cmp::Reverse(group[i].id)));
    let Some(keep) = keep else {
        fixes.unfixable.push(format!(
            "data file id {}: {} live delete files, none holding all {} deleted rows",
            group[0].data_file,
            group.len(),
            all.len()
        ));
        return Ok(());
    };
    let k = &group[keep];
    for (i, f) in group.iter().enumerate().filter(|(i, _)| *i != keep) {
        if f.path == k.path {
            fixes.statements.push(format!(
                "DELETE FROM {m}ducklake_delete_file WHERE delete_file_id = {}",
                f.id
            ));
            fixes.described.push(format!(
                "delete file row {} (a second row for {})",
                f.id, f.path
            ));
        } else if f.begin < k.begin {
            fixes.statements.push(format!(
                "UPDATE {m}ducklake_delete_file SET end_snapshot = {} WHERE delete_file_id = {}",
                k.begin, f.id
            ));
            fixes.described.push(format!(
                "delete file {} ends at snapshot {} ({} of its {} rows)",
                f.path,
                k.begin,
                sets[i].len(),
                all.len()
            ));
        } else {
            let (path, rel) = sql.scheduled_path("x", &data_path);
            fixes.statements.push(format!(
                "INSERT INTO {m}ducklake_files_scheduled_for_deletion (data_file_id, path, path_is_relative, schedule_start) \
                 SELECT x.delete_file_id, {path}, {rel}, NOW() FROM {m}ducklake_delete_file x WHERE x.delete_file_id = {}",
                f.id
            ));
            fixes.statements.push(format!(
                "DELETE FROM {m}ducklake_delete_file WHERE delete_file_id = {}",
                f.id
            ));
            fixes.described.push(format!(
                "delete file {} goes (scheduled for deletion; {} keeps its rows)",
                f.path, k.path
            ));
        }
    }
    Ok(())
}

/// The full path of a scheduled row, in SQL (`s` is its alias).
fn scheduled_full(s: &str, data_path: &str) -> String {
    format!(
        "(CASE WHEN coalesce(CAST({s}.path_is_relative AS BOOLEAN), true) THEN {} || {s}.path ELSE {s}.path END)",
        literal(data_path)
    )
}

fn schedule_fixes(sql: &CatalogSql, data_path: &str, fixes: &mut Fixes) -> anyhow::Result<()> {
    let m = sql.m();
    let full = scheduled_full("s", data_path);
    let referenced = format!(
        "(SELECT {} FROM {m}ducklake_data_file d UNION SELECT {} FROM {m}ducklake_delete_file x)",
        sql.full_path("d", data_path),
        sql.full_path("x", data_path)
    );
    for r in sql.rows(&format!(
        "SELECT DISTINCT s.path FROM {m}ducklake_files_scheduled_for_deletion s WHERE {full} IN {referenced} ORDER BY 1"
    ))? {
        let path = as_string(&r[0]);
        fixes.statements.push(format!(
            "DELETE FROM {m}ducklake_files_scheduled_for_deletion WHERE path = {}",
            literal(&path)
        ));
        fixes.described.push(format!("{path} taken off the schedule: the catalog still references it"));
    }
    let twice = sql.rows(&format!(
        "SELECT s.path, min(s.data_file_id) AS first_id, CAST(min(s.schedule_start) AS VARCHAR) AS first_start, \
         count(*) AS times, min(CASE WHEN coalesce(CAST(s.path_is_relative AS BOOLEAN), true) THEN 1 ELSE 0 END) AS rel \
         FROM {m}ducklake_files_scheduled_for_deletion s WHERE {full} NOT IN {referenced} \
         GROUP BY s.path HAVING count(*) > 1 ORDER BY 1"
    ))?;
    let sched = format!("{m}ducklake_files_scheduled_for_deletion");
    for r in twice {
        let path = literal(&as_string(&r[0]));
        // Every row of the path, then one back, as it was first scheduled.
        fixes
            .statements
            .push(format!("DELETE FROM {sched} WHERE path = {path}"));
        fixes.statements.push(format!(
            "INSERT INTO {sched} (data_file_id, path, path_is_relative, schedule_start) \
             VALUES ({}, {path}, {}, CAST({} AS TIMESTAMPTZ))",
            as_i64(&r[1]),
            as_i64(&r[4]) == 1,
            literal(&as_string(&r[2]))
        ));
        fixes.described.push(format!(
            "{path} scheduled {} times: once now",
            as_i64(&r[3])
        ));
    }
    Ok(())
}

/// Ok(false): something it found could not be fixed.
pub fn dedup_deletions(lake: &Lake, dry_run: bool, ask: &Ask) -> anyhow::Result<bool> {
    let sql = CatalogSql::new(lake);
    let data_path = lake.data_path()?;
    let mut fixes = Fixes::default();
    let live = live_duplicates(&sql, &data_path)?;
    for group in live.chunk_by(|a, b| a.data_file == b.data_file) {
        fix_group(lake, &sql, group, &mut fixes)?;
    }
    schedule_fixes(&sql, &data_path, &mut fixes)?;
    for d in &fixes.described {
        println!("dedup-deletions: {d}");
    }
    for u in &fixes.unfixable {
        println!("dedup-deletions: cannot fix: {u}");
    }
    let summary = format!(
        "{} data files with several live delete files, {} fixes, {} left as they are",
        live.chunk_by(|a, b| a.data_file == b.data_file).count(),
        fixes.described.len(),
        fixes.unfixable.len()
    );
    if dry_run || fixes.statements.is_empty() {
        println!(
            "dedup-deletions: {summary}{}",
            if dry_run { " (dry run)" } else { "" }
        );
        return Ok(fixes.unfixable.is_empty());
    }
    ask.confirm(&lake.cfg, &format!("fix deletion bookkeeping: {summary}"))?;
    sql.atomic(&fixes.statements)?;
    crate::report::add(
        crate::report::what::DELETIONS_FIXED,
        fixes.described.len() as u64,
    );
    println!("dedup-deletions: done: {summary}");
    Ok(fixes.unfixable.is_empty())
}
