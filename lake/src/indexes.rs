//! bootstrap-indexes: the btrees on the Postgres catalog that DuckLake does
//! not create itself (it makes only primary keys). The writer's
//! `catalog_indexes.rs` lists them and builds one itself. Without them the
//! catalog scans whole tables for the queries maintenance and large lakes
//! run most.
//! Each is built with CREATE INDEX CONCURRENTLY IF NOT EXISTS, outside a
//! transaction, so writers keep committing while it builds.
use anyhow::bail;

use super::catalog::{as_string, Lake, META};
use millpond_writer::lake_api::literal;
use millpond_writer::lake_api::Catalog;
pub use millpond_writer::lake_api::INDEXES;

pub fn create_sql(name: &str, table: &str, columns: &str) -> String {
    format!("CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} ({columns})")
}

/// Our indexes in the catalog's schema, with whether each is valid (a
/// concurrent build that failed leaves an invalid index behind).
fn existing(lake: &Lake) -> anyhow::Result<Vec<(String, bool)>> {
    let q = "SELECT c.relname::TEXT, i.indisvalid::TEXT FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relname LIKE 'millpond\\_%'";
    Ok(lake
        .rows(&format!(
            "SELECT * FROM postgres_query({}, {})",
            literal(META),
            literal(q)
        ))?
        .iter()
        .map(|r| (as_string(&r[0]), as_string(&r[1]) == "true"))
        .collect())
}

/// Returns how many indexes were created.
pub fn bootstrap(lake: &Lake, dry_run: bool) -> anyhow::Result<usize> {
    if !matches!(lake.cfg.catalog, Catalog::Postgres { .. }) {
        bail!("bootstrap-indexes is for the Postgres catalog; the embedded catalog needs none");
    }
    println!("target: {}", lake.cfg.describe());
    let before = existing(lake)?;
    let mut created = 0;
    for (name, table, columns) in INDEXES {
        let sql = create_sql(name, table, columns);
        if before.iter().any(|(n, _)| n == name) {
            println!("bootstrap-indexes: {name} exists");
            continue;
        }
        if dry_run {
            println!("bootstrap-indexes: would run {sql}");
            continue;
        }
        lake.exec(&format!(
            "CALL postgres_execute({}, {}, use_transaction => false)",
            literal(META),
            literal(&sql)
        ))?;
        println!("bootstrap-indexes: created {name} on {table} ({columns})");
        created += 1;
    }
    let invalid: Vec<String> = existing(lake)?
        .into_iter()
        .filter(|(_, valid)| !valid)
        .map(|(n, _)| n)
        .collect();
    if !invalid.is_empty() {
        bail!(
            "invalid indexes (a concurrent build failed): {}; DROP INDEX CONCURRENTLY each and run bootstrap-indexes again",
            invalid.join(", ")
        );
    }
    Ok(created)
}
