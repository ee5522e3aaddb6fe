//! `millpond-lake`: maintenance and lake-state metrics for the DuckLake a
//! Millpond writer fills. It reads the writer's own DUCKLAKE_* / DUCKDB_S3_*
//! variables and opens the lake with the writer's session setup, and runs
//! DuckLake's own maintenance functions.
//!
//! Exit status: 0 done, 1 failed (or fsck found problems), 2 bad arguments
//! or configuration.
mod catalog;
mod cli;
mod compact;
mod config;
mod confirm;
mod fsck;
mod indexes;
mod lifecycle;
mod metrics;
mod shell;
mod units;

use std::process::ExitCode;

use clap::Parser;
use millpond_shared::config::Env;

pub use compact::{Tier, TIERS};
pub use indexes::INDEXES;

use self::catalog::Lake;
use self::cli::{Cli, Command};
use self::config::ToolConfig;
use self::confirm::Ask;
use self::lifecycle::Expire;

const NAME: &str = "millpond-lake";

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let cfg = match ToolConfig::from_env(&Env::from_process()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    match run(cli, cfg) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{NAME}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Ok(false): the command ran and found something wrong.
fn run(cli: Cli, cfg: ToolConfig) -> anyhow::Result<bool> {
    let ask = Ask::new(cli.yes);
    if let Command::Metrics { once, push_url } = cli.command {
        let _logs = millpond_shared::logging::init(&cfg.common, NAME);
        if once {
            let url = push_url.or_else(|| cfg.metrics.push_url.clone());
            metrics::once(&cfg, url.as_deref())?;
            return Ok(true);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(metrics::serve(cfg))?;
        return Ok(true);
    }
    let lake = Lake::open(&cfg.lake)?;
    match cli.command {
        Command::Metrics { .. } => unreachable!("handled above"),
        Command::Shell { sql } if sql.is_empty() => return shell::interactive(&lake),
        Command::Shell { sql } => shell::run_all(&lake, &sql)?,
        Command::Expire {
            older_than,
            keep_last,
            dry_run,
        } => {
            let which = match (older_than, keep_last) {
                (Some(age), _) => Expire::OlderThan(age),
                (None, Some(n)) => Expire::KeepLast(n),
                (None, None) => unreachable!("clap requires one"),
            };
            lifecycle::expire(&lake, which, dry_run, &ask)?;
        }
        Command::Cleanup {
            older_than,
            dry_run,
        } => {
            lifecycle::cleanup(&lake, older_than, dry_run, &ask)?;
        }
        Command::FindOrphans { older_than } => {
            let found = lifecycle::find_orphans(&lake, older_than)?;
            println!("orphans: found {} files", found.len());
            for p in found {
                println!("  {p}");
            }
        }
        Command::DeleteOrphans {
            older_than,
            execute,
        } => {
            lifecycle::delete_orphans(&lake, older_than, execute, &ask)?;
        }
        Command::Fsck { catalog_only } => {
            let problems = fsck::fsck(&lake, catalog_only)?;
            fsck::report(&problems);
            return Ok(problems.is_empty());
        }
        Command::Checkpoint => lifecycle::checkpoint(&lake, &ask)?,
        Command::FlushInlined { table } => {
            let tables = table
                .map(|t| lake.select_tables(Some(&t), &cfg.schema))
                .transpose()?;
            lifecycle::flush_inlined(&lake, tables.as_deref())?;
        }
        Command::Compact(args) => {
            let tables = lake.select_tables(args.table.as_deref(), &cfg.schema)?;
            let opts = compact::Options {
                tiers: args.tier,
                dry_run: args.dry_run,
                threads: args.threads,
                memory_limit: args.memory_limit,
                max_files: args.max_files,
            };
            compact::compact(&lake, &tables, &opts, &ask)?;
        }
        Command::Maintain(args) => maintain(&lake, &args, &ask)?,
        Command::BootstrapIndexes { dry_run } => {
            indexes::bootstrap(&lake, dry_run)?;
        }
    }
    Ok(true)
}

/// The safe chain, confirmed once: nothing younger than its safety age is
/// deleted, and orphans are only reported.
fn maintain(lake: &Lake, args: &cli::MaintainArgs, ask: &Ask) -> anyhow::Result<()> {
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
        lifecycle::flush_inlined(lake, None)?;
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
    lifecycle::expire(
        lake,
        Expire::OlderThan(args.expire_older_than),
        args.dry_run,
        ask,
    )?;
    lifecycle::cleanup(lake, args.cleanup_older_than, args.dry_run, ask)?;
    let orphans = lifecycle::find_orphans(lake, args.orphans_older_than)?;
    println!(
        "maintain: {} orphaned files (not deleted; see delete-orphans)",
        orphans.len()
    );
    println!("maintain: after: {}", lake.summary()?);
    Ok(())
}
