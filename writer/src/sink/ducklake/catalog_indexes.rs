//! Btrees on a Postgres catalog that DuckLake 1.5.5 does not create (it
//! makes primary keys only). Without them the catalog scans whole tables,
//! which grow with the lake, for the queries commits, maintenance and large
//! lakes run most. `millpond-lake bootstrap-indexes` builds them all,
//! concurrently; the writer builds `PER_COMMIT` itself at session start.
use duckdb::Connection;

use super::connect::{attach_again, scrub};
use super::lake_config::{Catalog, LakeConfig};
use super::sql::literal;

/// The index whose absence every commit pays for: `ducklake_file_column_stats`
/// by `(table_id, column_id)`, read whenever a query filters a table (the
/// offsets re-check, the lease reads). Measured after ten minutes of 16
/// writers: 0.9-1.7 ms a read without it, seven reads a commit, growing with
/// every data file; ~0.1 ms with it.
pub const PER_COMMIT: &str = "millpond_file_column_stats_by_column";

/// (index, table, columns). Names start with `millpond_` so they are ours to
/// find again.
pub const INDEXES: [(&str, &str, &str); 11] = [
    // Compaction and file listings: the live files of one table.
    (
        "millpond_data_file_table_live",
        "ducklake_data_file",
        "table_id, end_snapshot",
    ),
    (
        "millpond_delete_file_table_live",
        "ducklake_delete_file",
        "table_id, end_snapshot",
    ),
    // Snapshot-range reads: changes between snapshots, expiry.
    (
        "millpond_data_file_table_begin",
        "ducklake_data_file",
        "table_id, begin_snapshot",
    ),
    (
        "millpond_data_file_end",
        "ducklake_data_file",
        "end_snapshot",
    ),
    (
        "millpond_snapshot_time",
        "ducklake_snapshot",
        "snapshot_time",
    ),
    (
        "millpond_scheduled_start",
        "ducklake_files_scheduled_for_deletion",
        "schedule_start",
    ),
    // Per-file joins: a file's deletes, statistics and partition values.
    (
        "millpond_delete_file_data_file",
        "ducklake_delete_file",
        "data_file_id",
    ),
    (
        "millpond_column_stats_file",
        "ducklake_file_column_stats",
        "data_file_id",
    ),
    (
        "millpond_partition_value_file",
        "ducklake_file_partition_value",
        "data_file_id",
    ),
    // DuckLake reads a table's per-file statistics by table and column
    // whenever a query filters it (every commit's offsets re-check and lease
    // reads): the writer creates this one itself (`PER_COMMIT`).
    (
        PER_COMMIT,
        "ducklake_file_column_stats",
        "table_id, column_id",
    ),
    (
        "millpond_column_table",
        "ducklake_column",
        "table_id, begin_snapshot",
    ),
];

/// Creates `PER_COMMIT` on a Postgres catalog when `pg_indexes` lacks it,
/// once per session, through a short-lived attachment. A plain CREATE
/// INDEX, so that two writers starting together leave one valid index (the
/// second waits, then finds it); it holds the table's inserts for the
/// build, once. Best effort: an index that cannot be created (the catalog's
/// tables owned by another role) is logged with the statement to run.
pub fn ensure_per_commit(cfg: &LakeConfig, conn: &Connection) {
    const AS: &str = "millpond_catalog";
    if !matches!(cfg.catalog, Catalog::Postgres { .. }) {
        return;
    }
    if let Err(e) = attach_again(cfg, conn, AS, "", false) {
        tracing::warn!(error = %e.message, "could not check the catalog's indexes");
        return;
    }
    let present = conn.query_row(
        &format!(
            "SELECT count(*) FROM postgres_query('{AS}', {})",
            literal(&format!(
                "SELECT 1 FROM pg_indexes WHERE schemaname = 'public' AND indexname = '{PER_COMMIT}'"
            ))
        ),
        [],
        |row| row.get::<_, i64>(0),
    );
    if !matches!(present, Ok(n) if n > 0) {
        let (_, table, columns) = INDEXES
            .iter()
            .find(|(name, _, _)| *name == PER_COMMIT)
            .expect("PER_COMMIT is listed");
        let create =
            format!("CREATE INDEX IF NOT EXISTS {PER_COMMIT} ON public.{table} ({columns})");
        match conn.execute_batch(&format!(
            "CALL postgres_execute('{AS}', {})",
            literal(&create)
        )) {
            Ok(()) => tracing::info!(index = PER_COMMIT, "created a catalog index"),
            Err(e) => tracing::warn!(
                error = %scrub(cfg, &e.to_string()),
                statement = %create,
                "could not create a catalog index; commits scan the table without it. Run the statement as the tables' owner"
            ),
        }
    }
    let _ = conn.execute_batch(&format!("DETACH DATABASE IF EXISTS {AS}"));
}
