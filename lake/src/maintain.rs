//! maintain: the safe chain, confirmed once.
use super::catalog::Lake;
use super::cleanup::cleanup;
use super::cli_args::MaintainArgs;
use super::compact;
use super::confirm::Ask;
use super::expire::{expire, Expire};
use super::lifecycle::flush_inlined;
use super::orphans::find_orphans;

/// The safe chain, confirmed once: nothing younger than its safety age is
/// deleted, and orphans are only reported.
pub fn maintain(lake: &Lake, args: &MaintainArgs, ask: &Ask) -> anyhow::Result<()> {
    println!("maintain: before: {}", lake.summary()?);
    if !args.dry_run {
        ask.confirm(
            &lake.cfg,
            &format!(
                "maintain: flush inlined rows, {}expire snapshots older than {}s, delete files scheduled more than {}s ago",
                if args.no_compact { "" } else { "compact, " },
                args.expire_older_than.as_secs(),
                args.cleanup_older_than.as_secs()
            ),
        )?;
        flush_inlined(lake, None)?;
    }
    if !args.no_compact {
        let tables = lake.tables()?;
        let opts = compact::Options {
            dry_run: args.dry_run,
            threads: args.threads,
            memory_limit: args.memory_limit.clone(),
            ..Default::default()
        };
        compact::compact(lake, &tables, &opts, ask)?;
    }
    expire(
        lake,
        Expire::OlderThan(args.expire_older_than),
        args.dry_run,
        ask,
    )?;
    cleanup(lake, args.cleanup_older_than, args.dry_run, ask)?;
    let orphans = find_orphans(lake, args.orphans_older_than)?;
    println!(
        "maintain: {} orphaned files (not deleted; see delete-orphans)",
        orphans.len()
    );
    println!("maintain: after: {}", lake.summary()?);
    if lake.is_sqlite() {
        if let Some(advice) = sqlite_advice(lake.snapshots()?) {
            println!("{advice}");
        }
    }
    Ok(())
}

/// Most snapshots a SQLite catalog keeps for a flush to cost within about a
/// fifth of a new lake's (with compaction every ~1,000 flushes). DuckLake
/// begins each catalog transaction with a lookup of the newest snapshot,
/// and DuckDB's SQLite reader passes SQLite no filter, so every flush reads
/// every kept snapshot (measured: ~0.5 us each, against ~24 ms for a flush;
/// README "A long-lived lake").
const SQLITE_SNAPSHOTS: i64 = 5_000;

/// What to do when a SQLite catalog keeps more snapshots than that.
fn sqlite_advice(snapshots: i64) -> Option<String> {
    (snapshots > SQLITE_SNAPSHOTS).then(|| {
        format!(
            "maintain: {snapshots} snapshots kept on a SQLite catalog, and every flush reads each of them; \
             to hold a flush within about a fifth of a new lake's cost, keep fewer than {SQLITE_SNAPSHOTS} \
             (a shorter --expire-older-than) or move the catalog to Postgres (README \"A long-lived lake\")"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sqlite_catalog_past_five_thousand_snapshots_is_told_to_keep_fewer() {
        assert_eq!(sqlite_advice(0), None);
        assert_eq!(sqlite_advice(5_000), None);
        let advice = sqlite_advice(5_001).expect("advice past the limit");
        assert!(advice.contains("5001 snapshots kept"), "{advice}");
        assert!(advice.contains("--expire-older-than"), "{advice}");
    }
}
