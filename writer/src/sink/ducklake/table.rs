//! Creating the target table from the first batch and evolving it.
use std::collections::HashMap;

use arrow::datatypes::Schema;
use duckdb::{params, Connection};

use super::classify::{lake_error, COLUMNS_CHANGED};
use super::config::DuckLakeConfig;
use super::partition_by::PartitionBy;
use super::sql::{ident, literal};
use super::types::{duck_type, is_widening, normalize};
use crate::sink::SinkError;

/// Live columns of the target table, by lowercase name.
pub type LiveColumns = HashMap<String, String>;

pub fn read_columns(conn: &Connection, cfg: &DuckLakeConfig) -> duckdb::Result<LiveColumns> {
    let mut stmt = conn.prepare(
        "SELECT column_name, data_type FROM information_schema.columns \
         WHERE table_catalog = 'lake' AND table_schema = ? AND table_name = ?",
    )?;
    let rows = stmt.query_map(params![cfg.schema, cfg.table], |row| {
        Ok((
            row.get::<_, String>(0)?.to_ascii_lowercase(),
            normalize(&row.get::<_, String>(1)?),
        ))
    })?;
    rows.collect()
}

/// Inside the write transaction: fails it with [`COLUMNS_CHANGED`] when the
/// table no longer has as many columns as the `cols` read before it began
/// (a column another writer added since; a drop and an add in that window
/// are not seen); `None` for a table not created yet.
pub fn columns_unchanged_sql(cfg: &DuckLakeConfig, cols: &LiveColumns) -> Option<String> {
    (!cols.is_empty()).then(|| {
        format!(
            "SELECT CASE WHEN (SELECT count(*) FROM information_schema.columns \
             WHERE table_catalog = 'lake' AND table_schema = {} AND table_name = {}) <> {} \
             THEN error({}) END",
            literal(&cfg.schema),
            literal(&cfg.table),
            cols.len(),
            literal(COLUMNS_CHANGED)
        )
    })
}

/// What evolving the table for one batch schema did.
#[derive(Debug, Default)]
pub struct Evolution {
    pub created: bool,
    pub added: Vec<String>,
    pub widened: Vec<String>,
    /// (column, live type, batch type) whose values must be converted to
    /// the live type: narrowing, incompatible, or changed by another writer.
    pub refused: Vec<(String, String, String)>,
    /// New columns not added: the table is at MILLPOND_MAX_COLUMNS.
    pub over_limit: Vec<String>,
}

/// Creates the lake schema when it is not `main` (another writer may be
/// doing the same: a failure here shows up at the CREATE TABLE after it).
pub fn ensure_schema(conn: &Connection, cfg: &DuckLakeConfig) {
    if cfg.schema != "main" {
        let _ = conn.execute_batch(&format!(
            "CREATE SCHEMA IF NOT EXISTS lake.{}",
            ident(&cfg.schema)
        ));
    }
}

fn exec(conn: &Connection, cfg: &DuckLakeConfig, sql: &str) -> Result<(), SinkError> {
    conn.execute_batch(sql).map_err(|e| duck_err(cfg, e))
}

fn duck_err(cfg: &DuckLakeConfig, e: duckdb::Error) -> SinkError {
    lake_error(&cfg.lake, &e.to_string())
}

/// What the table, whose columns are `cols`, needs for `schema`: the DDL
/// that adds its new columns (at most MILLPOND_MAX_COLUMNS payload columns;
/// the rest are `over_limit`) and widens the ones it widens, and the
/// columns whose values must be converted to the table's type (`refused`).
pub fn plan(cols: &LiveColumns, cfg: &DuckLakeConfig, schema: &Schema) -> (Vec<String>, Evolution) {
    let table = cfg.sql_table();
    let mut evo = Evolution::default();
    let mut ddl = Vec::new();
    // Payload columns the table may still grow by (_inserted_at is ours).
    let mut room = cfg
        .max_columns
        .saturating_sub(cols.keys().filter(|c| c.as_str() != "_inserted_at").count());
    for f in schema.fields() {
        let lower = f.name().to_ascii_lowercase();
        let batch_type = duck_type(f.data_type());
        match cols.get(&lower) {
            None if room == 0 => evo.over_limit.push(f.name().clone()),
            None => {
                room -= 1;
                ddl.push(format!(
                    "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {} {batch_type}",
                    ident(f.name())
                ));
                evo.added.push(f.name().clone());
            }
            Some(live_type) if *live_type == batch_type => {}
            Some(live_type) if is_widening(live_type, &batch_type) => {
                ddl.push(format!(
                    "ALTER TABLE {table} ALTER COLUMN {} SET DATA TYPE {batch_type}",
                    ident(f.name())
                ));
                evo.widened.push(f.name().clone());
            }
            Some(live_type) => {
                evo.refused
                    .push((f.name().clone(), live_type.clone(), batch_type));
            }
        }
    }
    (ddl, evo)
}

/// Records in `cols` what `plan`'s DDL did, once it is committed.
pub fn assume(cols: &mut LiveColumns, schema: &Schema, evo: &Evolution) {
    for f in schema.fields() {
        if evo.added.contains(f.name()) || evo.widened.contains(f.name()) {
            cols.insert(f.name().to_ascii_lowercase(), duck_type(f.data_type()));
        }
    }
}

/// `verb` (a `CREATE TABLE` form) for the target table with the columns of
/// `schema` (at most MILLPOND_MAX_COLUMNS; the rest meet the limit when
/// the table is planned) and `_inserted_at`.
fn create_sql(cfg: &DuckLakeConfig, schema: &Schema, verb: &str) -> String {
    let mut cols: Vec<String> = schema
        .fields()
        .iter()
        .take(cfg.max_columns)
        .map(|f| format!("{} {}", ident(f.name()), duck_type(f.data_type())))
        .collect();
    cols.push("_inserted_at TIMESTAMP WITH TIME ZONE".into());
    format!("{verb} {} ({})", cfg.sql_table(), cols.join(", "))
}

/// The DDL that creates the missing target table inside the transaction
/// that registers a flush's files, sparing the table a catalog commit of
/// its own; `None` when it needs that commit first: for
/// DUCKLAKE_PARTITION_BY (DuckLake refuses settings on a table created in
/// the same transaction), or for more columns than MILLPOND_MAX_COLUMNS.
/// The session's settings for DuckDB's inserts follow at the next flush,
/// which reads the new table (`ensure`). A plain `CREATE TABLE`: if another
/// writer created the table meanwhile, the transaction fails and is retried
/// on a fresh read of the catalog, instead of registering files against a
/// table it did not plan for.
pub fn create_in_write(cfg: &DuckLakeConfig, schema: &Schema) -> Option<String> {
    (cfg.partition_by.is_none() && schema.fields().len() <= cfg.max_columns)
        .then(|| create_sql(cfg, schema, "CREATE TABLE"))
}

/// Makes the table exist with every column of `schema` (already projected
/// to safe, non-reserved names). Races with other writers are absorbed by
/// re-reading the catalog.
pub fn ensure(
    conn: &Connection,
    cfg: &DuckLakeConfig,
    live: &mut Option<LiveColumns>,
    schema: &Schema,
) -> Result<Evolution, SinkError> {
    let mut evo = Evolution::default();
    let table = cfg.sql_table();
    // An empty map is a table not seen yet (read before it was created).
    let fresh = live.as_ref().is_none_or(HashMap::is_empty);
    if fresh {
        *live = Some(read_columns(conn, cfg).map_err(|e| duck_err(cfg, e))?);
    }
    if live.as_ref().is_some_and(HashMap::is_empty) {
        ensure_schema(conn, cfg);
        let create = create_sql(cfg, schema, "CREATE TABLE IF NOT EXISTS");
        match exec(conn, cfg, &create) {
            Ok(()) => evo.created = true,
            Err(e) => {
                tracing::info!(error = %e.message, "table creation raced another writer; re-reading the catalog")
            }
        }
        let cols = read_columns(conn, cfg).map_err(|e| duck_err(cfg, e))?;
        if cols.is_empty() {
            return Err(SinkError::transient(format!(
                "table {table} still missing after CREATE"
            )));
        }
        if evo.created {
            tracing::info!(table = %table, columns = cols.len(), "table created");
        }
        *live = Some(cols);
    }
    if fresh {
        if let Some(b) = &cfg.row_group_bytes {
            let set = exec(
                conn,
                cfg,
                &format!(
                    "CALL lake.set_option('parquet_row_group_size_bytes', {}, schema => {}, table_name => {})",
                    literal(b), literal(&cfg.schema), literal(&cfg.table)
                ),
            );
            // Fresh again next time, so the settings are not skipped.
            set.inspect_err(|_| *live = None)?;
        }
    }
    // Every change this batch needs, in one catalog commit: each commit
    // that alters the table fails other writers' inserts in flight, so one
    // per flush, not per column.
    let cols = live.as_mut().expect("loaded above");
    let (ddl, planned) = plan(cols, cfg, schema);
    evo.added = planned.added;
    evo.widened = planned.widened;
    evo.over_limit = planned.over_limit;
    if !ddl.is_empty() {
        let sql = format!("BEGIN TRANSACTION;\n{};\nCOMMIT", ddl.join(";\n"));
        if let Err(e) = exec(conn, cfg, &sql) {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
        // Read back what the table now holds: another writer may have
        // added the same column with another type first (ADD COLUMN IF
        // NOT EXISTS is then a no-op), or widened it further.
        *cols = read_columns(conn, cfg).map_err(|e| duck_err(cfg, e))?;
    }
    // DUCKLAKE_PARTITION_BY on the first write of every session, once the
    // batch's columns exist: idempotent, so a restart heals a table whose
    // creator died before partitioning it, and setting it on an existing
    // table partitions the files written next.
    if let (true, Some(p)) = (fresh, &cfg.partition_by) {
        if let Err(e) = partition(conn, cfg, p, cols) {
            // Fresh again next time, so partitioning is not skipped.
            *live = None;
            return Err(e);
        }
    }
    for f in schema.fields() {
        if evo.over_limit.contains(f.name()) {
            continue;
        }
        let batch_type = duck_type(f.data_type());
        match cols.get(&f.name().to_ascii_lowercase()) {
            Some(live_type) if *live_type != batch_type => {
                evo.refused
                    .push((f.name().clone(), live_type.clone(), batch_type));
            }
            Some(_) => {}
            None => {
                return Err(SinkError::transient(format!(
                    "column {} missing from {table} right after adding it (dropped meanwhile?)",
                    f.name()
                )))
            }
        }
    }
    Ok(evo)
}

/// `SET PARTITIONED BY`, refused first when a year/month/day/hour key's
/// column is no DATE or TIMESTAMP (DuckLake takes that setting, then fails
/// every insert). Errors name DUCKLAKE_PARTITION_BY.
fn partition(
    conn: &Connection,
    cfg: &DuckLakeConfig,
    p: &PartitionBy,
    cols: &LiveColumns,
) -> Result<(), SinkError> {
    if let Some((key, t)) = p.temporal_mismatch(|c| cols.get(c).map(String::as_str)) {
        return Err(SinkError::permanent(format!(
            "DUCKLAKE_PARTITION_BY: {key} needs a DATE or TIMESTAMP column; {} is {t} in {}",
            key.column,
            cfg.qualified_table()
        )));
    }
    let sql = format!(
        "ALTER TABLE {} SET PARTITIONED BY ({})",
        cfg.sql_table(),
        p.sql()
    );
    exec(conn, cfg, &sql).map_err(|mut e| {
        e.message = format!("applying DUCKLAKE_PARTITION_BY ({p}): {}", e.message);
        e
    })?;
    tracing::info!(partition_by = %p, "table partitioning applied");
    Ok(())
}

#[cfg(test)]
mod tests {
    use millpond_shared::config::{Env, EnvReader};

    use super::*;

    fn cfg() -> DuckLakeConfig {
        let env = Env::from_pairs([("DUCKLAKE_TABLE", "events")]);
        let mut r = EnvReader::new(&env);
        DuckLakeConfig::parse(&mut r).expect("valid")
    }

    /// The guard parses, passes while the table has the columns read, and
    /// fails with COLUMNS_CHANGED (a contention) once it has one more.
    #[test]
    fn the_columns_guard_fails_when_a_column_was_added() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("ATTACH ':memory:' AS lake; CREATE TABLE lake.main.events (a BIGINT)")
            .unwrap();
        let cfg = cfg();
        let cols = read_columns(&conn, &cfg).unwrap();
        assert_eq!(cols.len(), 1);
        let guard = columns_unchanged_sql(&cfg, &cols).unwrap();
        conn.execute_batch(&guard).unwrap();
        conn.execute_batch("ALTER TABLE lake.main.events ADD COLUMN b VARCHAR")
            .unwrap();
        let err = conn.execute_batch(&guard).unwrap_err().to_string();
        assert!(err.contains(COLUMNS_CHANGED), "{err}");
        assert!(lake_error(&cfg.lake, &err).is_contention());
        assert!(columns_unchanged_sql(&cfg, &LiveColumns::new()).is_none());
    }
}
