//! Orphans: files under the data path that no catalog row references.
use std::path::Path;
use std::time::Duration;

use anyhow::bail;

use super::catalog::Lake;
use super::confirm::Ask;
use super::lifecycle::{paths, show};
use millpond_writer::lake_api::Catalog;

/// An embedded catalog inside the data path would look like an orphan.
fn catalog_in_data_path(lake: &Lake) -> Option<String> {
    let Catalog::Embedded { path, .. } = &lake.cfg.catalog else {
        return None;
    };
    let data = Path::new(&lake.cfg.data_path).canonicalize().ok()?;
    let catalog = path.canonicalize().ok()?;
    catalog
        .starts_with(&data)
        .then(|| catalog.display().to_string())
}

/// Files under the data path that no snapshot references and nothing
/// scheduled for deletion, older than `older_than` (younger ones may be a
/// writer's upload that is about to commit).
pub fn find_orphans(lake: &Lake, older_than: Duration) -> anyhow::Result<Vec<String>> {
    let mut found = paths(
        lake,
        &format!(
            "SELECT path FROM ducklake_delete_orphaned_files('lake', dry_run => true, older_than => {}) ORDER BY 1",
            lake.cutoff(older_than)?
        ),
    )?;
    if let Some(catalog) = catalog_in_data_path(lake) {
        // The catalog and its journal files (catalog.sqlite-wal, ...).
        found.retain(|p| {
            !Path::new(p)
                .canonicalize()
                .is_ok_and(|c| c.to_string_lossy().starts_with(&catalog))
        });
        println!("warning: the catalog {catalog} lies inside the data path; it is not an orphan");
    }
    Ok(found)
}

/// Lists orphans; deletes them only with `execute` (and confirmation).
pub fn delete_orphans(
    lake: &Lake,
    older_than: Duration,
    execute: bool,
    ask: &Ask,
) -> anyhow::Result<usize> {
    let plan = find_orphans(lake, older_than)?;
    if !execute || plan.is_empty() {
        show("orphans: found", &plan, true);
        if execute {
            return Ok(0);
        }
        println!("orphans: dry run; pass --execute to delete them");
        return Ok(plan.len());
    }
    if let Some(catalog) = catalog_in_data_path(lake) {
        bail!("the catalog {catalog} lies inside the data path; delete orphans by hand");
    }
    show("orphans: found", &plan, true);
    ask.confirm(
        &lake.cfg,
        &format!(
            "delete {} files no snapshot references, older than {}s",
            plan.len(),
            older_than.as_secs()
        ),
    )?;
    let done = paths(
        lake,
        &format!(
            "SELECT path FROM ducklake_delete_orphaned_files('lake', dry_run => false, older_than => {}) ORDER BY 1",
            lake.cutoff(older_than)?
        ),
    )?;
    show("orphans: deleted", &done, false);
    crate::report::add(crate::report::what::FILES_DELETED, done.len() as u64);
    Ok(done.len())
}
