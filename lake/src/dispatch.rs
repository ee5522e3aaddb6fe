//! One command, run: the lake opened, the command's module called. A
//! recipe chain (`run`) comes back here for each of its steps.
use super::catalog::Lake;
use super::cli::Command;
use super::config::ToolConfig;
use super::confirm::Ask;
use super::{
    chain, cleanup, compact, dedup, expire, expire_snapshots, fsck, heal, indexes, lifecycle,
    maintain, metrics, orphans, partitions, probe, recipes, shell, stats,
};

/// Ok(false): the command ran and found something wrong (or something it
/// could not fix).
pub fn execute(command: Command, cfg: &ToolConfig, ask: &Ask) -> anyhow::Result<bool> {
    match command {
        Command::Metrics { once, push_url } => {
            if once {
                let url = push_url.or_else(|| cfg.metrics.push_url.clone());
                metrics::once(cfg, url.as_deref())?;
                return Ok(true);
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(metrics::serve(cfg.clone()))?;
            Ok(true)
        }
        Command::Run { recipes: names } => {
            let changing: Vec<&str> = names
                .iter()
                .filter_map(|n| recipes::find(n))
                .filter(|r| r.changes)
                .map(|r| r.name)
                .collect();
            if !changing.is_empty() {
                ask.confirm(
                    &cfg.lake,
                    &format!(
                        "run {} (changing the lake: {})",
                        names.join(", "),
                        changing.join(", ")
                    ),
                )?;
            }
            chain::run(&names, &mut |c| execute(c, cfg, ask))
        }
        other => on_lake(other, &Lake::open(&cfg.lake)?, cfg, ask),
    }
}

fn on_lake(command: Command, lake: &Lake, cfg: &ToolConfig, ask: &Ask) -> anyhow::Result<bool> {
    let tables = |t: Option<String>| lake.select_tables(t.as_deref(), &cfg.schema);
    match command {
        Command::Metrics { .. } | Command::Run { .. } => unreachable!("handled by execute"),
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
