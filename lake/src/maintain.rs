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
    Ok(())
}
