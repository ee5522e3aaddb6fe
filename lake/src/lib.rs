//! `millpond-lake`: maintenance and lake-state metrics for the DuckLake a
//! Millpond writer fills. It reads the writer's own DUCKLAKE_* / DUCKDB_S3_*
//! variables and opens the lake with the writer's session setup (both from
//! the writer's library, `millpond_writer::lake_api`), and runs DuckLake's
//! own maintenance functions, plus repairs of the catalog that DuckLake has
//! no function for.
//!
//! Exit status: 0 done, 1 failed (or found something it could not fix),
//! 2 bad arguments or configuration.
mod catalog;
mod chain;
mod cleanup;
mod cli;
mod cli_args;
mod compact;
mod config;
mod confirm;
mod dedup;
mod dispatch;
mod expire;
mod expire_snapshots;
mod fsck;
mod heal;
mod indexes;
mod lifecycle;
mod lock;
mod maintain;
mod metrics;
mod native;
mod orphans;
mod partitions;
mod probe;
mod recipes;
mod report;
mod retention;
mod shell;
mod stats;
mod storage;
mod tiers;
mod units;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use millpond_shared::config::Env;

pub use indexes::INDEXES;
pub use recipes::RECIPES;
pub use tiers::{Tier, TIERS};

use self::cli::{Cli, Command};
use self::config::ToolConfig;
use self::confirm::Ask;

const NAME: &str = "millpond-lake";

pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let cfg = match ToolConfig::from_env(&Env::from_process()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    // The metrics exporter logs (a chain's metrics-once step too).
    let logs = match &cli.command {
        Command::Metrics { .. } => true,
        Command::Run { recipes } => recipes.iter().any(|r| r == "metrics-once"),
        _ => false,
    };
    let _logs = logs.then(|| millpond_shared::logging::init(&cfg.common, NAME));
    millpond_shared::heap::trim_every(cfg.common.heap_trim);
    millpond_shared::failpoint::arm(cfg.failpoint);
    let line: Vec<String> = std::env::args().skip(1).collect();
    let run = dispatch::Run {
        holder: lock::Holder::me(matches.subcommand_name().unwrap_or(""), &line.join(" ")),
        lock_wait: cli.lock_wait.unwrap_or(cfg.lock_wait),
    };
    let command = matches.subcommand_name().unwrap_or("").to_owned();
    let started = std::time::Instant::now();
    let result = dispatch::execute(cli.command, &cfg, &Ask::new(cli.yes), &run);
    if let Err(e) = &result {
        eprintln!("{NAME}: {e:#}");
    }
    // The report is a maintenance run's last line (and its push, when
    // configured); a shell or the exporter is not a run to report.
    let reported = match command.as_str() {
        "shell" | "metrics" => Ok(()),
        _ => report::finish(&cfg, &command, started, &result),
    };
    if let Err(e) = &reported {
        eprintln!("{NAME}: the run's report: {e:#}");
    }
    match (result, reported) {
        (Ok(true), Ok(())) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
