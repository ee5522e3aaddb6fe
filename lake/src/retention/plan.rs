//! Reading what a retention would drop: the table's time keys, and each of
//! its live files judged by its partition values and its statistics.
use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use duckdb::types::Value;

use super::spec::{Key, TimeKeys};
use crate::catalog::{as_i64, as_string, meta, Lake, TableRef};

/// One partition past the retention.
pub struct Partition {
    pub label: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Each file and its rows, less their deletions.
    pub files: Vec<(i64, i64)>,
    pub rows: i64,
    pub bytes: u64,
}

pub struct Plan {
    pub table: TableRef,
    pub keys: TimeKeys,
    pub age: Duration,
    /// Now minus the retention: a partition that ended by then goes.
    pub cutoff: DateTime<Utc>,
    pub droppable: Vec<Partition>,
    /// Partitions inside the retention (or without a time).
    pub kept: usize,
    /// Files past the retention by their partition values that were left,
    /// and why.
    pub left: Vec<String>,
    /// Live files written under another partitioning.
    pub other_files: i64,
}

struct FileRow {
    id: i64,
    rows: i64,
    bytes: u64,
    /// The newest time its statistics hold, in microseconds since the
    /// epoch (None: no statistics).
    newest: Option<i64>,
    nulls: Option<i64>,
    values: BTreeMap<i64, Option<String>>,
}

fn text(v: &Value) -> Option<String> {
    (!matches!(v, Value::Null)).then(|| as_string(v))
}

fn int(v: &Value) -> Option<i64> {
    (!matches!(v, Value::Null)).then(|| as_i64(v))
}

impl Plan {
    pub fn read(lake: &Lake, table: &TableRef, age: Duration) -> anyhow::Result<Plan> {
        let spec = lake.rows(&format!(
            "SELECT pi.partition_id::BIGINT, pc.partition_key_index::BIGINT, pc.transform, c.column_name, \
             c.column_type, c.column_id::BIGINT \
             FROM {} pi \
             JOIN {} pc ON pc.partition_id = pi.partition_id AND pc.table_id = pi.table_id \
             JOIN {} c ON c.table_id = pc.table_id AND c.column_id = pc.column_id AND c.end_snapshot IS NULL \
             WHERE pi.table_id = {} AND pi.end_snapshot IS NULL ORDER BY 2",
            meta("ducklake_partition_info"),
            meta("ducklake_partition_column"),
            meta("ducklake_column"),
            table.id
        ))?;
        let keys: Vec<Key> = spec
            .iter()
            .map(|r| Key {
                index: as_i64(&r[1]),
                transform: as_string(&r[2]),
                column: as_string(&r[3]),
                column_type: as_string(&r[4]),
            })
            .collect();
        let time = TimeKeys::of(&table.qualified(), &keys).map_err(anyhow::Error::msg)?;
        let partition_id = as_i64(&spec[0][0]);
        let column_id = spec
            .iter()
            .find(|r| as_string(&r[3]) == time.column)
            .map(|r| as_i64(&r[5]))
            .expect("the time column is a key's");
        let cutoff = Utc::now()
            - chrono::TimeDelta::from_std(age)
                .map_err(|_| anyhow::anyhow!("retention too long"))?;
        let files = files(lake, table, partition_id, column_id, &time)?;
        let other_files = lake.int(&format!(
            "SELECT count(*) FROM {} WHERE table_id = {} AND end_snapshot IS NULL \
             AND (partition_id IS NULL OR partition_id <> {partition_id})",
            meta("ducklake_data_file"),
            table.id
        ))?;
        let mut plan = Plan {
            table: table.clone(),
            keys: time,
            age,
            cutoff,
            droppable: Vec::new(),
            kept: 0,
            left: Vec::new(),
            other_files,
        };
        plan.judge(files);
        Ok(plan)
    }

    fn judge(&mut self, files: Vec<FileRow>) {
        let mut by_label: BTreeMap<(DateTime<Utc>, String), Partition> = BTreeMap::new();
        let mut kept = std::collections::BTreeSet::new();
        for f in files {
            let values: Vec<Option<&str>> = self
                .keys
                .fields
                .iter()
                .map(|(_, index)| f.values.get(index).and_then(|v| v.as_deref()))
                .collect();
            let label = self.keys.label(&values);
            let Some((start, end)) = self.keys.span(&values) else {
                kept.insert(label);
                continue;
            };
            if end > self.cutoff {
                kept.insert(label);
                continue;
            }
            let agrees = match (f.newest, f.nulls) {
                (Some(newest), Some(0)) if newest < end.timestamp_micros() => None,
                (Some(newest), _) if newest >= end.timestamp_micros() => Some(format!(
                    "its statistics hold {} up to {} (run repair-partition-values)",
                    self.keys.column,
                    DateTime::from_timestamp_micros(newest)
                        .map_or_else(|| newest.to_string(), |t| t.to_rfc3339())
                )),
                (Some(_), _) => Some(format!("it holds NULL in {}", self.keys.column)),
                (None, _) => Some(format!("it has no statistics for {}", self.keys.column)),
            };
            if let Some(why) = agrees {
                self.left
                    .push(format!("data file {} of {label}: {why}", f.id));
                kept.insert(label);
                continue;
            }
            let p = by_label
                .entry((start, label.clone()))
                .or_insert_with(|| Partition {
                    label,
                    start,
                    end,
                    files: Vec::new(),
                    rows: 0,
                    bytes: 0,
                });
            p.files.push((f.id, f.rows));
            p.rows += f.rows;
            p.bytes += f.bytes;
        }
        // A partition with a file left counts as kept as well: its other
        // files, each checked on its own, still go.
        self.droppable = by_label.into_values().collect();
        self.kept = kept.len();
    }

    /// Every file the drop ends, and its rows.
    pub fn files(&self) -> BTreeMap<i64, i64> {
        self.droppable
            .iter()
            .flat_map(|p| p.files.iter().copied())
            .collect()
    }
}

/// The live files of the current partitioning, each with its calendar
/// values, newest time and live rows.
fn files(
    lake: &Lake,
    table: &TableRef,
    partition_id: i64,
    column_id: i64,
    keys: &TimeKeys,
) -> anyhow::Result<Vec<FileRow>> {
    let t = keys.column_type.to_ascii_lowercase();
    let newest = match t.as_str() {
        "date" => "epoch_us(CAST(TRY_CAST(s.max_value AS DATE) AS TIMESTAMP))",
        "timestamptz" => "epoch_us(TRY_CAST(s.max_value AS TIMESTAMPTZ))",
        _ => "epoch_us(TRY_CAST(s.max_value AS TIMESTAMP))",
    };
    let indexes: Vec<String> = keys.fields.iter().map(|(_, i)| i.to_string()).collect();
    let rows = lake.rows(&format!(
        "SELECT f.data_file_id::BIGINT, (f.record_count - coalesce(d.deleted, 0))::BIGINT, \
         f.file_size_bytes::BIGINT, {newest}, s.null_count::BIGINT, \
         pv.partition_key_index::BIGINT, pv.partition_value \
         FROM {files} f \
         LEFT JOIN {stats} s ON s.data_file_id = f.data_file_id AND s.column_id = {column_id} \
         LEFT JOIN (SELECT data_file_id, sum(delete_count) AS deleted FROM {deletes} \
                    WHERE end_snapshot IS NULL AND table_id = {table} GROUP BY 1) d \
           ON d.data_file_id = f.data_file_id \
         LEFT JOIN {values} pv ON pv.data_file_id = f.data_file_id \
           AND pv.partition_key_index IN ({indexes}) \
         WHERE f.table_id = {table} AND f.end_snapshot IS NULL AND f.partition_id = {partition_id} \
         ORDER BY 1",
        files = meta("ducklake_data_file"),
        stats = meta("ducklake_file_column_stats"),
        deletes = meta("ducklake_delete_file"),
        values = meta("ducklake_file_partition_value"),
        table = table.id,
        indexes = indexes.join(", "),
    ))?;
    let mut out: BTreeMap<i64, FileRow> = BTreeMap::new();
    for r in rows {
        let id = as_i64(&r[0]);
        let f = out.entry(id).or_insert_with(|| FileRow {
            id,
            rows: as_i64(&r[1]),
            bytes: as_i64(&r[2]).max(0) as u64,
            newest: int(&r[3]),
            nulls: int(&r[4]),
            values: BTreeMap::new(),
        });
        if let Some(index) = int(&r[5]) {
            f.values.insert(index, text(&r[6]));
        }
    }
    Ok(out.into_values().collect())
}
