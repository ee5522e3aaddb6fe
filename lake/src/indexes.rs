//! bootstrap-indexes: the btrees on the Postgres catalog that DuckLake does
//! not create itself (it makes only primary keys). The writer's
//! `catalog_indexes.rs` lists them, holds the one rule for building them
//! (CREATE INDEX CONCURRENTLY IF NOT EXISTS outside a transaction, so
//! writers keep committing; an invalid index an interrupted build left is
//! dropped concurrently and built again) and builds one itself. Without
//! them the catalog scans whole tables for the queries maintenance and
//! large lakes run most.
//!
//! It takes no maintenance lock: it changes no row of the lake, a long
//! build must not hold up the scheduled maintenance, and two runs at once
//! meet IF NOT EXISTS (an index another session is building is left to it).
use anyhow::bail;

use super::catalog::{Lake, META};
pub use millpond_writer::lake_api::INDEXES;
use millpond_writer::lake_api::{
    ensure_index, index_state, index_states, index_steps, scrub, Built, Catalog, IndexState,
};

/// Returns how many indexes were built (or built again).
pub fn bootstrap(lake: &Lake, dry_run: bool) -> anyhow::Result<usize> {
    if !matches!(lake.cfg.catalog, Catalog::Postgres { .. }) {
        bail!("bootstrap-indexes is for the Postgres catalog; the embedded catalog needs none");
    }
    println!("target: {}", lake.cfg.describe());
    let error = |e: duckdb::Error| anyhow::anyhow!("{}", scrub(&lake.cfg, &e.to_string()));
    let before = index_states(lake.conn(), META).map_err(error)?;
    let mut built = 0;
    for index in &INDEXES {
        let (name, table, columns) = *index;
        let state = index_state(&before, name);
        if dry_run {
            match index_steps(index, state).as_slice() {
                [] => println!("bootstrap-indexes: {name} exists ({state:?})"),
                steps => println!("bootstrap-indexes: would run {}", steps.join("; ")),
            }
            continue;
        }
        match ensure_index(lake.conn(), META, index).map_err(error)? {
            Built::Present => println!("bootstrap-indexes: {name} exists"),
            Built::Created => {
                println!("bootstrap-indexes: created {name} on {table} ({columns})");
                built += 1;
            }
            Built::Rebuilt => {
                println!(
                    "bootstrap-indexes: {name} was invalid (an interrupted build): dropped and built again on {table} ({columns})"
                );
                built += 1;
            }
            Built::LeftToOtherBuild => {
                println!("bootstrap-indexes: {name} is being built by another session")
            }
        }
    }
    if dry_run {
        return Ok(0);
    }
    let invalid: Vec<String> = index_states(lake.conn(), META)
        .map_err(error)?
        .into_iter()
        .filter(|(_, s)| *s != IndexState::Valid)
        .map(|(n, s)| format!("{n} ({s:?})"))
        .collect();
    if !invalid.is_empty() {
        bail!(
            "indexes not valid yet: {}; a build another session runs finishes on its own, run bootstrap-indexes again after it",
            invalid.join(", ")
        );
    }
    Ok(built)
}
