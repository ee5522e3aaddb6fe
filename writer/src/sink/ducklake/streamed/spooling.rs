//! Writing a streamed flush's rows to its spool as they arrive: the files
//! start once the held batches pass DUCKLAKE_FILES_FROM_BYTES and the table
//! can take files; each batch is prepared, the table planned for it and its
//! values converted, as for a flush sent whole, before it reaches a file.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use millpond_shared::metrics::dead_letter_reason;

use super::columns::plan;
use super::refusal::Refusal;
use super::stream::{aligned, Streamed};
use crate::sink::ducklake::config::DuckLakeConfig;
use crate::sink::ducklake::lake::Lake;
use crate::sink::ducklake::names::RESERVED_COLUMNS;
use crate::sink::ducklake::spool::{self, fits_a_file, Remote, Spool};
use crate::sink::ducklake::to_live;
use crate::sink::ducklake::types::duck_type;
use crate::sink::letters::Letters;
use crate::sink::prepare::{prepare, NameCase};
use crate::sink::{Flush, SinkError};

/// Starts the flush's files with what it holds: checks the table,
/// then writes the held batches. Nothing is in a file unless it passed.
pub fn start_files(
    lake: &mut Lake,
    st: &mut Streamed,
    remote: Option<&Arc<Remote>>,
) -> Result<(), Refusal> {
    let (schema, batches) = aligned(st.held.clone())?;
    lake.open_table()?;
    if let Some(why) = table_refuses_files(lake)? {
        return Err(Refusal::Shape(why));
    }
    let codec = file_codec(lake)?.map_err(Refusal::Shape)?;
    let live = lake.caches.live.as_ref().expect("read by open_table");
    let spool = Spool::new(
        table_dir(&lake.cfg),
        codec,
        row_group_bytes(&lake.cfg),
        live,
    );
    st.spool = Some(match remote {
        Some(remote) => spool.with_remote(remote.clone()),
        None => spool,
    });
    spool_rows(lake, st, schema, batches)
}

/// Why the table itself needs DuckDB's insert: it is partitioned
/// (files carry no partition values), or has a column of a type no file
/// carries (`spool::uncarried`).
fn table_refuses_files(lake: &Lake) -> Result<Option<String>, SinkError> {
    let live = lake.caches.live.as_ref().expect("read by open_table");
    if let Some(why) = spool::uncarried(live) {
        return Ok(Some(why));
    }
    let keys: i64 = lake
        .conn()
        .query_row(
            "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_partition_info p \
             JOIN __ducklake_metadata_lake.ducklake_partition_column pc \
               ON pc.partition_id = p.partition_id AND pc.table_id = p.table_id \
             JOIN __ducklake_metadata_lake.ducklake_table t \
               ON p.table_id = t.table_id AND t.end_snapshot IS NULL \
             JOIN __ducklake_metadata_lake.ducklake_schema s \
               ON t.schema_id = s.schema_id AND s.end_snapshot IS NULL \
             WHERE p.end_snapshot IS NULL AND s.schema_name = ? AND t.table_name = ?",
            duckdb::params![lake.cfg.schema, lake.cfg.table],
            |r| r.get(0),
        )
        .map_err(|e| lake.err(e))?;
    Ok((keys > 0).then(|| "the table is partitioned".to_owned()))
}

/// `{data path}/{schema}/{table}`, where DuckLake puts the table's files.
fn table_dir(cfg: &DuckLakeConfig) -> PathBuf {
    Path::new(&cfg.lake.data_path)
        .join(&cfg.schema)
        .join(&cfg.table)
}

/// The table's `parquet_compression` (most specific scope first) as a
/// codec; `Ok(Err(why))` when the files cannot use it.
pub(super) fn file_codec(
    lake: &Lake,
) -> Result<Result<parquet::basic::Compression, String>, SinkError> {
    let conn = lake.conn();
    let sql = "SELECT option_name, value FROM lake.options() \
        WHERE option_name IN ('parquet_compression', 'parquet_compression_level') \
        AND (scope = 'GLOBAL' OR (scope = 'SCHEMA' AND scope_entry = ?) OR (scope = 'TABLE' AND scope_entry = ?)) \
        ORDER BY CASE scope WHEN 'TABLE' THEN 0 WHEN 'SCHEMA' THEN 1 ELSE 2 END";
    let table = format!("{}.{}", lake.cfg.schema, lake.cfg.table);
    let read = || -> duckdb::Result<Vec<(String, String)>> {
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map(duckdb::params![lake.cfg.schema, table], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        rows.collect()
    };
    let options = read().map_err(|e| lake.err(e))?;
    let first = |name: &str| {
        options
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let level = first("parquet_compression_level").and_then(|l| l.parse().ok());
    Ok(spool::codec(first("parquet_compression"), level))
}

fn row_group_bytes(cfg: &DuckLakeConfig) -> Option<usize> {
    cfg.row_group_bytes
        .as_deref()
        .and_then(|s| parse_size::parse_size(s).ok())
        .map(|b| b as usize)
}

/// Prepares rows as a flush sent whole would be, evolves the table
/// for them, and writes them to the spool. Nothing reaches a file
/// unless every check passed.
pub fn spool_rows(
    lake: &mut Lake,
    st: &mut Streamed,
    schema: arrow::datatypes::SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(), Refusal> {
    let part = Flush {
        id: String::new(),
        trigger: Default::default(),
        ranges: Vec::new(),
        schema,
        batches,
        dead_letters: Default::default(),
        streamed: None,
    };
    let mut p = prepare(
        &part,
        &RESERVED_COLUMNS,
        lake.cfg.unsafe_names,
        NameCase::Insensitive,
    )?;
    drop(part);
    lake.open_table()?;
    let conn = lake.conn();
    let live = lake.caches.live.as_ref().expect("read by open_table");
    let plan = plan(&p.schema, live, &mut st.pending, lake.cfg.max_columns)?;
    p.refuse(&plan.over_limit, dead_letter_reason::TOO_MANY_COLUMNS, &[]);
    let done = to_live::to_live(conn, &mut p, &plan.refused, &[]).map_err(SinkError::transient)?;
    if let Some((col, live)) = done.cast_in_sql.first() {
        return Err(Refusal::Shape(format!(
            "column {col} is {live} in the table, which values are cast to by DuckDB"
        )));
    }
    if let Some(f) = p
        .schema
        .fields()
        .iter()
        .find(|f| !fits_a_file(f.data_type()))
    {
        return Err(Refusal::Shape(format!(
            "column {} is {}, which a Parquet file does not carry exactly as DuckDB types it",
            f.name(),
            duck_type(f.data_type())
        )));
    }
    let spool = st.spool.as_mut().expect("spooling");
    for b in &p.batches {
        spool
            .write(b)
            .map_err(|e| Refusal::Failed(SinkError::transient(e)))?;
    }
    for key in plan.over_limit {
        if !st.over_limit.contains(&key) {
            st.over_limit.push(key);
        }
    }
    for (col, live, lost) in done.failed {
        match st
            .unconverted
            .iter_mut()
            .find(|(c, l, _)| *c == col && *l == live)
        {
            Some(seen) => seen.2 += lost,
            None => st.unconverted.push((col, live, lost)),
        }
    }
    st.dead_letters
        .append(Letters::of(&std::mem::take(&mut p.dead_letters)));
    st.unsafe_names.extend(p.unsafe_names);
    st.reserved_names.extend(p.reserved_names);
    st.rows_with_unsafe += p.rows_with_unsafe;
    Ok(())
}
