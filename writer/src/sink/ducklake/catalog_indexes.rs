//! Btrees on a Postgres catalog that DuckLake 1.5.5 does not create (it
//! makes primary keys only). Without them the catalog scans whole tables,
//! which grow with the lake, for the queries commits, maintenance and large
//! lakes run most. `millpond-lake bootstrap-indexes` builds them all; the
//! writer builds `PER_COMMIT` itself, in the background of its start.
//!
//! One rule for both ([`ensure`]): every build is `CREATE INDEX
//! CONCURRENTLY IF NOT EXISTS`, outside a transaction, so the catalog's
//! writers keep committing while it runs (a plain CREATE INDEX holds every
//! insert into the table for the whole build: 43.7 s on 20 million
//! statistics rows). A concurrent build that was interrupted (a killed pod,
//! a lost connection) leaves an invalid index behind, which Postgres
//! maintains but never reads; the next run finds it invalid with no build
//! in progress, drops it concurrently and builds it again.
use std::time::Instant;

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

/// Our indexes in the catalog's schema: name, valid, and whether a build of
/// it is running now (`pg_stat_progress_create_index`; a build by another
/// role shows no index there and counts as not running).
const LIST: &str = "SELECT c.relname::TEXT, i.indisvalid::TEXT, \
     EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = c.oid)::TEXT \
     FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
     JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = current_schema() AND c.relname LIKE 'millpond\\_%'";

/// One of our indexes as the catalog has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Missing,
    Valid,
    /// Invalid while a concurrent build of it runs: left to that build.
    Building,
    /// Invalid with no build running: an interrupted build's leftover.
    Invalid,
}

/// What [`ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built {
    Present,
    Created,
    /// Dropped (invalid) and built again.
    Rebuilt,
    /// Another session is building it.
    LeftToOtherBuild,
}

/// `CREATE INDEX CONCURRENTLY IF NOT EXISTS`: of two builds of one name at
/// once, the second returns at once, or (started before the first's entry
/// was committed) fails on the name: harmless, the build is best effort and
/// the next start or `bootstrap-indexes` finds the index.
pub fn create_sql(name: &str, table: &str, columns: &str) -> String {
    format!("CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} ({columns})")
}

pub fn drop_sql(name: &str) -> String {
    format!("DROP INDEX CONCURRENTLY IF EXISTS {name}")
}

/// The statements that leave `(name, table, columns)` valid from `state`,
/// in order, each on its own outside a transaction.
pub fn steps(index: &(&str, &str, &str), state: State) -> Vec<String> {
    let (name, table, columns) = *index;
    match state {
        State::Missing => vec![create_sql(name, table, columns)],
        State::Invalid => vec![drop_sql(name), create_sql(name, table, columns)],
        State::Valid | State::Building => vec![],
    }
}

/// The state of each of our indexes, read through the DuckDB attachment
/// `alias` of the catalog's database.
pub fn states(conn: &Connection, alias: &str) -> duckdb::Result<Vec<(String, State)>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT * FROM postgres_query({}, {})",
        literal(alias),
        literal(LIST)
    ))?;
    let rows = stmt.query_map([], |r| {
        let (name, valid, building): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let state = match (valid == "true", building == "true") {
            (true, _) => State::Valid,
            (false, true) => State::Building,
            (false, false) => State::Invalid,
        };
        Ok((name, state))
    })?;
    rows.collect()
}

/// The state of `name` among `states`.
pub fn state_of(states: &[(String, State)], name: &str) -> State {
    states
        .iter()
        .find(|(n, _)| n == name)
        .map_or(State::Missing, |(_, s)| *s)
}

/// Leaves `index` valid, concurrently: created when missing, dropped and
/// built again when an interrupted build left it invalid, left alone while
/// another session builds it.
pub fn ensure(conn: &Connection, alias: &str, index: &(&str, &str, &str)) -> duckdb::Result<Built> {
    let state = state_of(&states(conn, alias)?, index.0);
    for sql in steps(index, state) {
        conn.execute_batch(&format!(
            "CALL postgres_execute({}, {}, use_transaction => false)",
            literal(alias),
            literal(&sql)
        ))?;
    }
    Ok(match state {
        State::Missing => Built::Created,
        State::Invalid => Built::Rebuilt,
        State::Valid => Built::Present,
        State::Building => Built::LeftToOtherBuild,
    })
}

/// `PER_COMMIT` on a Postgres catalog, built in the background of the
/// writer's start on a connection of its own: the writer serves and
/// commits meanwhile (the index only makes commits cheaper), and a first
/// start on a large catalog is not held past its readiness probe. A writer
/// stopped mid-build leaves an invalid index that its next start (or
/// `millpond-lake bootstrap-indexes`) builds again. Best effort: an index
/// that cannot be built (the catalog's tables owned by another role) is
/// logged with the statement to run.
pub fn ensure_per_commit(cfg: &LakeConfig, conn: &Connection) {
    if !matches!(cfg.catalog, Catalog::Postgres { .. }) {
        return;
    }
    let own = match conn.try_clone() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "could not check the catalog's indexes");
            return;
        }
    };
    let cfg = cfg.clone();
    let started = std::thread::Builder::new()
        .name("catalog-index".into())
        .spawn(move || build_per_commit(&cfg, &own));
    if let Err(e) = started {
        tracing::warn!(error = %e, "could not start the catalog index build");
    }
}

fn build_per_commit(cfg: &LakeConfig, conn: &Connection) {
    const AS: &str = "millpond_catalog";
    if let Err(e) = attach_again(cfg, conn, AS, "", false) {
        tracing::warn!(error = %e.message, "could not check the catalog's indexes");
        return;
    }
    let index = INDEXES
        .iter()
        .find(|(name, _, _)| *name == PER_COMMIT)
        .expect("PER_COMMIT is listed");
    let t = Instant::now();
    match ensure(conn, AS, index) {
        Ok(Built::Present) => {}
        Ok(Built::Created) => tracing::info!(
            index = PER_COMMIT,
            seconds = t.elapsed().as_secs_f64(),
            "built a catalog index concurrently"
        ),
        Ok(Built::Rebuilt) => tracing::warn!(
            index = PER_COMMIT,
            seconds = t.elapsed().as_secs_f64(),
            "found a catalog index left invalid by an interrupted build; dropped it and built it again"
        ),
        Ok(Built::LeftToOtherBuild) => tracing::info!(
            index = PER_COMMIT,
            "another session is building a catalog index; leaving it to that build"
        ),
        Err(e) => tracing::warn!(
            error = %scrub(cfg, &e.to_string()),
            statement = %steps(index, State::Invalid).join("; "),
            "could not build a catalog index; commits scan the table without it. Run the statements as the tables' owner"
        ),
    }
    let _ = conn.execute_batch(&format!("DETACH DATABASE IF EXISTS {AS}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_is_concurrent_and_an_invalid_index_is_dropped_first() {
        let index = (
            "millpond_x",
            "ducklake_file_column_stats",
            "table_id, column_id",
        );
        assert_eq!(
            steps(&index, State::Missing),
            ["CREATE INDEX CONCURRENTLY IF NOT EXISTS millpond_x ON ducklake_file_column_stats (table_id, column_id)"]
        );
        let rebuild = steps(&index, State::Invalid);
        assert_eq!(rebuild[0], "DROP INDEX CONCURRENTLY IF EXISTS millpond_x");
        assert_eq!(rebuild[1], steps(&index, State::Missing)[0]);
        assert!(steps(&index, State::Valid).is_empty());
        assert!(steps(&index, State::Building).is_empty());
        let listed = [("millpond_x".to_owned(), State::Invalid)];
        assert_eq!(state_of(&listed, "millpond_x"), State::Invalid);
        assert_eq!(state_of(&listed, "millpond_y"), State::Missing);
    }
}
