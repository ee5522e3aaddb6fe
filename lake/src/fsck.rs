//! fsck: every file the catalog references exists in storage with the size
//! the catalog recorded, and the catalog agrees with itself.
//!
//! Referenced means every data and delete file row the catalog still holds,
//! current or kept for time travel; files already scheduled for deletion
//! need not exist. Paths are resolved as DuckLake does: a relative file path
//! is under its table's path, under its schema's path, under the data path.
use std::collections::HashMap;

use super::catalog::{as_i64, as_string, meta, Lake};
use millpond_writer::lake_api::literal;

/// One thing wrong, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: &'static str,
    pub detail: String,
}

/// Resolved path, recorded size and owning table of every referenced file.
fn referenced_sql(data_path: &str) -> String {
    let latest = |table: &str, key: &str| {
        format!(
            "(SELECT * FROM {} QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY begin_snapshot DESC) = 1)",
            meta(table)
        )
    };
    let rel = |col: &str| format!("coalesce(CAST({col} AS BOOLEAN), true)");
    let files = |table: &str, kind: &str| {
        format!(
            "SELECT '{kind}' AS kind, f.table_id, f.path AS fpath, {frel} AS frel, f.file_size_bytes AS size FROM {} f",
            meta(table),
            frel = rel("f.path_is_relative")
        )
    };
    format!(
        "WITH f AS ({} UNION ALL {}), \
         t AS {}, s AS {} \
         SELECT f.kind, s.schema_name || '.' || t.table_name, \
           CASE WHEN f.frel THEN \
             (CASE WHEN {trel} THEN (CASE WHEN {srel} THEN {dp} || coalesce(s.path, '') ELSE s.path END) || coalesce(t.path, '') \
              ELSE t.path END) || f.fpath \
           ELSE f.fpath END, \
           f.size::BIGINT \
         FROM f JOIN t ON t.table_id = f.table_id JOIN s ON s.schema_id = t.schema_id ORDER BY 3",
        files("ducklake_data_file", "data"),
        files("ducklake_delete_file", "delete"),
        latest("ducklake_table", "table_id"),
        latest("ducklake_schema", "schema_id"),
        trel = rel("t.path_is_relative"),
        srel = rel("s.path_is_relative"),
        dp = literal(data_path),
    )
}

/// Catalog self-checks: (kind, query returning one text column per problem).
fn catalog_checks() -> Vec<(&'static str, String)> {
    let data = meta("ducklake_data_file");
    let del = meta("ducklake_delete_file");
    let table = meta("ducklake_table");
    let sched = meta("ducklake_files_scheduled_for_deletion");
    let snap = meta("ducklake_snapshot");
    vec![
        (
            "live file of a dropped table",
            format!(
                "SELECT 'file ' || d.path || ' of table id ' || d.table_id FROM {data} d \
                 WHERE d.end_snapshot IS NULL AND NOT EXISTS \
                 (SELECT 1 FROM {table} t WHERE t.table_id = d.table_id AND t.end_snapshot IS NULL)"
            ),
        ),
        (
            "referenced file scheduled for deletion",
            format!(
                "SELECT 'file id ' || x.id || ' (' || x.path || ') would be deleted by cleanup' FROM \
                 (SELECT data_file_id AS id, path FROM {data} UNION ALL SELECT delete_file_id, path FROM {del}) x \
                 WHERE x.id IN (SELECT data_file_id FROM {sched})"
            ),
        ),
        (
            "live delete file of a file that is not live",
            format!(
                "SELECT 'delete file ' || x.path || ' for data file id ' || x.data_file_id FROM {del} x \
                 WHERE x.end_snapshot IS NULL AND NOT EXISTS \
                 (SELECT 1 FROM {data} d WHERE d.data_file_id = x.data_file_id AND d.end_snapshot IS NULL)"
            ),
        ),
        (
            "path live twice",
            format!(
                "SELECT path || ' (' || count(*) || ' live rows, table id ' || table_id || ')' FROM {data} \
                 WHERE end_snapshot IS NULL GROUP BY table_id, path HAVING count(*) > 1"
            ),
        ),
        (
            "snapshot range out of order",
            format!(
                "SELECT path || ': snapshots ' || begin_snapshot || '..' || end_snapshot FROM \
                 (SELECT path, begin_snapshot, end_snapshot FROM {data} UNION ALL \
                  SELECT path, begin_snapshot, end_snapshot FROM {del}) \
                 WHERE end_snapshot < begin_snapshot OR begin_snapshot > (SELECT max(snapshot_id) FROM {snap})"
            ),
        ),
    ]
}

/// Every problem found; storage is checked unless `catalog_only`.
pub fn fsck(lake: &Lake, catalog_only: bool) -> anyhow::Result<Vec<Problem>> {
    let mut problems = Vec::new();
    for (kind, sql) in catalog_checks() {
        for r in lake.rows(&sql)? {
            problems.push(Problem {
                kind,
                detail: as_string(&r[0]),
            });
        }
    }
    if catalog_only {
        return Ok(problems);
    }
    let mut data_path = lake.data_path()?;
    if !data_path.ends_with('/') {
        data_path.push('/');
    }
    let referenced = lake.rows(&referenced_sql(&data_path))?;
    // One listing of the data path; files elsewhere are looked up one by one.
    let listed: HashMap<String, i64> = lake
        .rows(&format!(
            "SELECT filename, size::BIGINT FROM read_blob({})",
            literal(&format!("{data_path}**"))
        ))?
        .iter()
        .map(|r| (as_string(&r[0]), as_i64(&r[1])))
        .collect();
    let (mut data, mut deletes) = (0, 0);
    for r in &referenced {
        let (kind, table, path, size) = (
            as_string(&r[0]),
            as_string(&r[1]),
            as_string(&r[2]),
            as_i64(&r[3]),
        );
        if kind == "data" {
            data += 1;
        } else {
            deletes += 1;
        }
        let found = match listed.get(&path) {
            Some(s) => Some(*s),
            None if !path.starts_with(&data_path) => lake
                .rows(&format!(
                    "SELECT size::BIGINT FROM read_blob({})",
                    literal(&path)
                ))
                .ok()
                .and_then(|rows| rows.first().map(|r| as_i64(&r[0]))),
            None => None,
        };
        match found {
            None => problems.push(Problem {
                kind: "missing file",
                detail: format!("{kind} file {path} of {table}"),
            }),
            Some(s) if s != size => problems.push(Problem {
                kind: "size mismatch",
                detail: format!("{kind} file {path} of {table}: catalog {size} B, storage {s} B"),
            }),
            Some(_) => {}
        }
    }
    println!(
        "fsck: {data} data files and {deletes} delete files referenced, {} in the data path",
        listed.len()
    );
    Ok(problems)
}

pub fn report(problems: &[Problem]) {
    for p in problems {
        println!("fsck: {}: {}", p.kind, p.detail);
    }
    if problems.is_empty() {
        println!("fsck: no problems found");
    } else {
        println!("fsck: {} problems found", problems.len());
    }
}
