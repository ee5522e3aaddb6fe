//! repair-partition-values: every live data file of a partitioned table
//! carries one value per partition key in `ducklake_file_partition_value`,
//! and DuckLake trusts those values to skip files in a query and to keep
//! compaction inside a partition. A file whose values are missing (an import
//! or compaction that lost them) or wrong (a string "null" for NULL, a value
//! from the file's path rather than its rows) is read, its values computed
//! from its rows with the key's transform, and the catalog set to them.
//!
//! A file whose rows span more than one value of a key cannot be given one
//! and is reported. On a TIMESTAMPTZ column the value depends on the time
//! zone of the session that wrote the file; those are computed in UTC and
//! only filled in where missing, never overwritten.
use std::collections::BTreeMap;

use super::catalog::{as_i64, as_string, Lake, TableRef};
use super::confirm::Ask;
use super::native::CatalogSql;
use millpond_writer::lake_api::{ident, literal};

/// One partition key of one live file, and what the catalog holds for it.
struct Key {
    index: i64,
    transform: String,
    column: String,
    zoned: bool,
    /// None: no row; Some(None): a NULL value.
    stored: Option<Option<String>>,
}

struct File {
    id: i64,
    table_id: i64,
    path: String,
    keys: Vec<Key>,
}

fn files(sql: &CatalogSql, data_path: &str, tables: &[TableRef]) -> anyhow::Result<Vec<File>> {
    let m = sql.m();
    let ids: Vec<String> = tables.iter().map(|t| t.id.to_string()).collect();
    let rows = sql.rows(&format!(
        "SELECT f.data_file_id, f.table_id, {}, pc.partition_key_index, pc.transform, c.column_name, \
         c.column_type, CASE WHEN pv.data_file_id IS NULL THEN 0 ELSE 1 END, pv.partition_value \
         FROM {m}ducklake_data_file f \
         JOIN {m}ducklake_partition_column pc ON pc.partition_id = f.partition_id AND pc.table_id = f.table_id \
         JOIN {m}ducklake_column c ON c.table_id = f.table_id AND c.column_id = pc.column_id AND c.end_snapshot IS NULL \
         LEFT JOIN {m}ducklake_file_partition_value pv \
           ON pv.data_file_id = f.data_file_id AND pv.partition_key_index = pc.partition_key_index \
         WHERE f.end_snapshot IS NULL AND f.table_id IN ({}) ORDER BY 1, 4",
        sql.full_path("f", data_path),
        if ids.is_empty() { "NULL".into() } else { ids.join(", ") }
    ))?;
    let mut out: BTreeMap<i64, File> = BTreeMap::new();
    for r in rows {
        let id = as_i64(&r[0]);
        let file = out.entry(id).or_insert_with(|| File {
            id,
            table_id: as_i64(&r[1]),
            path: as_string(&r[2]),
            keys: Vec::new(),
        });
        let stored = (as_i64(&r[7]) == 1).then(|| {
            Some(as_string(&r[8])).filter(|_| !matches!(r[8], duckdb::types::Value::Null))
        });
        file.keys.push(Key {
            index: as_i64(&r[3]),
            transform: as_string(&r[4]),
            column: as_string(&r[5]),
            zoned: as_string(&r[6]).eq_ignore_ascii_case("timestamptz"),
            stored,
        });
    }
    Ok(out.into_values().collect())
}

/// The key's value over the file's rows, as DuckLake writes it: one value,
/// or an error saying why there is none.
fn computed(lake: &Lake, f: &File) -> anyhow::Result<Result<Vec<Option<String>>, String>> {
    let mut exprs = Vec::new();
    for k in &f.keys {
        let col = ident(&k.column);
        let e = match k.transform.as_str() {
            "identity" => col,
            t @ ("year" | "month" | "day" | "hour") => format!("{t}({col})"),
            other => {
                return Ok(Err(format!(
                    "key {}: transform {other} is not repaired",
                    k.index
                )))
            }
        };
        exprs.push(format!(
            "count(DISTINCT CAST({e} AS VARCHAR)), max(CAST({e} AS VARCHAR)), count(*) FILTER (WHERE {e} IS NULL)"
        ));
    }
    let rows = match lake.rows(&format!(
        "SELECT {} FROM read_parquet({})",
        exprs.join(", "),
        literal(&f.path)
    )) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("reading it: {e:#}"))),
    };
    let r = &rows[0];
    let mut values = Vec::new();
    for (i, k) in f.keys.iter().enumerate() {
        let (distinct, nulls) = (as_i64(&r[3 * i]), as_i64(&r[3 * i + 2]));
        match (distinct, nulls > 0) {
            (1, false) => values.push(Some(as_string(&r[3 * i + 1]))),
            (0, true) => values.push(None),
            _ => {
                return Ok(Err(format!(
                    "key {} ({} of {}): its rows hold {} values",
                    k.index,
                    k.transform,
                    k.column,
                    distinct + (nulls > 0) as i64
                )))
            }
        }
    }
    Ok(Ok(values))
}

fn sql_value(v: &Option<String>) -> String {
    v.as_deref().map(literal).unwrap_or_else(|| "NULL".into())
}

/// Ok(false): a file's values could not be worked out.
pub fn repair_partition_values(
    lake: &Lake,
    tables: &[TableRef],
    dry_run: bool,
    ask: &Ask,
) -> anyhow::Result<bool> {
    let sql = CatalogSql::new(lake);
    let m = sql.m();
    let found = files(&sql, &lake.data_path()?, tables)?;
    let (mut statements, mut unfixable, mut checked) = (Vec::new(), 0, 0);
    for f in &found {
        let values = match computed(lake, f)? {
            Ok(v) => v,
            Err(why) => {
                println!("repair-partition-values: cannot fix {}: {why}", f.path);
                unfixable += 1;
                continue;
            }
        };
        checked += 1;
        for (k, v) in f.keys.iter().zip(&values) {
            let fix = match &k.stored {
                None => format!(
                    "INSERT INTO {m}ducklake_file_partition_value (data_file_id, table_id, partition_key_index, partition_value) \
                     VALUES ({}, {}, {}, {})",
                    f.id, f.table_id, k.index, sql_value(v)
                ),
                Some(s) if s == v => continue,
                Some(s) if k.zoned => {
                    println!(
                        "repair-partition-values: {} key {}: catalog {:?}, {:?} in UTC; left as it is (TIMESTAMPTZ: the writer's time zone decides)",
                        f.path, k.index, s, v
                    );
                    continue;
                }
                Some(_) => format!(
                    "UPDATE {m}ducklake_file_partition_value SET partition_value = {} \
                     WHERE data_file_id = {} AND partition_key_index = {}",
                    sql_value(v), f.id, k.index
                ),
            };
            println!(
                "repair-partition-values: {} key {} ({} of {}): catalog {}, rows {}",
                f.path,
                k.index,
                k.transform,
                k.column,
                match &k.stored {
                    None => "missing".to_owned(),
                    Some(s) => format!("{s:?}"),
                },
                v.as_deref()
                    .map(|s| format!("{s:?}"))
                    .unwrap_or_else(|| "NULL".into())
            );
            statements.push(fix);
        }
    }
    let summary = format!(
        "{checked} files checked, {} values to set, {unfixable} files that cannot be fixed",
        statements.len()
    );
    if dry_run || statements.is_empty() {
        println!(
            "repair-partition-values: {summary}{}",
            if dry_run { " (dry run)" } else { "" }
        );
        return Ok(unfixable == 0);
    }
    ask.confirm(&lake.cfg, &format!("set partition values: {summary}"))?;
    sql.atomic(&statements)?;
    crate::report::add(
        crate::report::what::PARTITION_VALUES_REPAIRED,
        statements.len() as u64,
    );
    println!("repair-partition-values: done: {summary}");
    Ok(unfixable == 0)
}
