//! One command, run: the catalog's maintenance lock taken when the command
//! changes the lake, the lake opened, the command's module called. A
//! recipe chain (`run`) takes the lock once and comes back here for each
//! of its steps.
use std::time::Duration;

use millpond_shared::failpoint::{self, Failpoint};

use super::catalog::Lake;
use super::cli::Command;
use super::config::ToolConfig;
use super::confirm::Ask;
use super::lock::{self, Holder};
use super::{
    chain, cleanup, compact, dedup, expire, expire_snapshots, fsck, heal, indexes, lifecycle,
    maintain, metrics, orphans, partitions, probe, recipes, retention, shell, stats,
};

/// Who this run is and how long it waits for the lock.
pub struct Run {
    pub holder: Holder,
    pub lock_wait: Duration,
}

/// Ok(false): the command ran and found something wrong (or something it
/// could not fix).
pub fn execute(command: Command, cfg: &ToolConfig, ask: &Ask, run: &Run) -> anyhow::Result<bool> {
    match command {
        Command::Run { recipes: names } => {
            let changing = changing(&names);
            if changing.is_empty() {
                return chain::run(&names, &mut |c| step(c, cfg, ask));
            }
            ask.confirm(
                &cfg.lake,
                &format!(
                    "run {} (changing the lake: {})",
                    names.join(", "),
                    changing.join(", ")
                ),
            )?;
            let mut lock = hold(cfg, run)?;
            chain::run(&names, &mut |c| {
                lock.check()?;
                step(c, cfg, ask)
            })
        }
        other if changes(&other) => {
            let _lock = hold(cfg, run)?;
            step(other, cfg, ask)
        }
        other => step(other, cfg, ask),
    }
}

/// The catalog's maintenance lock, held until dropped.
fn hold(cfg: &ToolConfig, run: &Run) -> anyhow::Result<lock::LakeLock> {
    let held = lock::take(&cfg.lake, &run.holder, run.lock_wait)?;
    failpoint::pause(Failpoint::PauseHoldingLakeLock);
    Ok(held)
}

/// Whether a command changes the lake, and so takes the maintenance lock.
/// `shell` runs what a person types and takes none; `bootstrap-indexes`
/// changes no row of the lake, and its concurrent builds run beside
/// writers and other maintenance (a long build must not hold up the
/// hourly compaction), so it takes none either.
pub fn changes(command: &Command) -> bool {
    match command {
        Command::Shell { .. }
        | Command::FindOrphans { .. }
        | Command::Fsck { .. }
        | Command::CompactProbe { .. }
        | Command::ListDroppablePartitions(_)
        | Command::BootstrapIndexes { .. }
        | Command::Metrics { .. } => false,
        Command::Expire(args) => !args.dry_run,
        Command::ExpireSnapshots { which, .. } => !which.dry_run,
        Command::Cleanup { dry_run, .. }
        | Command::CleanupAll { dry_run }
        | Command::HealOrphans { dry_run, .. }
        | Command::DedupDeletions { dry_run }
        | Command::PurgeOrphanStats { dry_run }
        | Command::RepairPartitionValues { dry_run, .. } => !dry_run,
        Command::DeleteOrphans { execute, .. } | Command::DropPartitions { execute, .. } => {
            *execute
        }
        Command::Compact(args) => !args.dry_run,
        Command::Maintain(args) => !args.dry_run,
        Command::Checkpoint | Command::FlushInlined { .. } => true,
        Command::Run { recipes } => !changing(recipes).is_empty(),
    }
}

/// The recipes of a chain that change the lake.
fn changing(names: &[String]) -> Vec<&'static str> {
    names
        .iter()
        .filter_map(|n| recipes::find(n))
        .filter(|r| r.changes)
        .map(|r| r.name)
        .collect()
}

/// One command (a chain's step too), the lock already taken if it needs it.
fn step(command: Command, cfg: &ToolConfig, ask: &Ask) -> anyhow::Result<bool> {
    match command {
        Command::Metrics { once, push_url } => {
            if once {
                let url = push_url.or_else(|| cfg.metrics.push_url.clone());
                metrics::once(cfg, url.as_ref())?;
                return Ok(true);
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(metrics::serve(cfg.clone()))?;
            Ok(true)
        }
        Command::Run { .. } => unreachable!("a recipe is never a chain"),
        other => on_lake(other, &Lake::open(&cfg.lake)?, cfg, ask),
    }
}

fn on_lake(command: Command, lake: &Lake, cfg: &ToolConfig, ask: &Ask) -> anyhow::Result<bool> {
    let tables = |t: Option<String>| lake.select_tables(t.as_deref(), &cfg.schema);
    match command {
        Command::Metrics { .. } | Command::Run { .. } => unreachable!("handled by step"),
        Command::Shell { sql } if sql.is_empty() => return shell::interactive(lake),
        Command::Shell { sql } => shell::run_all(lake, &sql)?,
        Command::Expire(args) => {
            expire::expire(lake, args.which(), args.dry_run, ask)?;
        }
        Command::ExpireSnapshots { which, batch_size } => {
            expire_snapshots::expire_snapshots(
                lake,
                which.which(),
                batch_size as usize,
                which.dry_run,
                ask,
            )?;
        }
        Command::Cleanup {
            older_than,
            dry_run,
        } => {
            cleanup::cleanup(lake, older_than, dry_run, ask)?;
        }
        Command::CleanupAll { dry_run } => {
            cleanup::cleanup_all(lake, dry_run, ask)?;
        }
        Command::FindOrphans { older_than } => {
            let found = orphans::find_orphans(lake, older_than)?;
            println!("orphans: found {} files", found.len());
            for p in found {
                println!("  {p}");
            }
        }
        Command::DeleteOrphans {
            older_than,
            execute,
        } => {
            orphans::delete_orphans(lake, older_than, execute, ask)?;
        }
        Command::HealOrphans {
            older_than,
            table,
            quarantine,
            dry_run,
        } => {
            let tables = tables(table)?;
            return heal::heal_orphans(
                lake,
                &tables,
                cfg.dead_letter_table.as_deref(),
                older_than,
                quarantine.as_deref(),
                dry_run,
                ask,
            );
        }
        Command::DedupDeletions { dry_run } => return dedup::dedup_deletions(lake, dry_run, ask),
        Command::PurgeOrphanStats { dry_run } => {
            stats::purge_orphan_stats(lake, dry_run, ask)?;
        }
        Command::RepairPartitionValues { table, dry_run } => {
            return partitions::repair_partition_values(lake, &tables(table)?, dry_run, ask);
        }
        Command::ListDroppablePartitions(which) => {
            return retention::list(lake, &retention_target(lake, cfg, &which)?);
        }
        Command::DropPartitions { which, execute } => {
            let target = retention_target(lake, cfg, &which)?;
            return retention::drop_partitions(lake, &target, execute, ask);
        }
        Command::Fsck { catalog_only } => {
            let problems = fsck::fsck(lake, catalog_only)?;
            fsck::report(&problems);
            return Ok(problems.is_empty());
        }
        Command::Checkpoint => lifecycle::checkpoint(lake, ask)?,
        Command::FlushInlined { table } => {
            let tables = table.map(|t| tables(Some(t))).transpose()?;
            lifecycle::flush_inlined(lake, tables.as_deref())?;
        }
        Command::Compact(args) => {
            let opts = compact::Options {
                tiers: args.tier,
                dry_run: args.dry_run,
                threads: args.threads,
                memory_limit: args.memory_limit,
                max_files: args.max_files,
            };
            compact::compact(lake, &tables(args.table)?, &opts, ask)?;
        }
        Command::CompactProbe { table } => probe::compact_probe(lake, &tables(table)?)?,
        Command::Maintain(args) => maintain::maintain(lake, &args, ask)?,
        Command::BootstrapIndexes { dry_run } => {
            indexes::bootstrap(lake, dry_run)?;
        }
    }
    Ok(true)
}

fn retention_target(
    lake: &Lake,
    cfg: &ToolConfig,
    which: &crate::cli::RetentionArgs,
) -> anyhow::Result<retention::Target> {
    retention::target(
        lake,
        which.table.as_deref(),
        which.older_than,
        cfg.table.as_deref(),
        cfg.retention,
        &cfg.schema,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipes::RECIPES;

    #[test]
    fn a_recipe_changes_the_lake_exactly_when_its_command_does() {
        for recipe in RECIPES {
            assert_eq!(
                changes(&chain::command(recipe)),
                recipe.changes,
                "{}",
                recipe.name
            );
        }
    }
}
