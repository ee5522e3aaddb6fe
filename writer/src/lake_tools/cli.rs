//! The command line. Where the lake is comes from the environment (the
//! writer's DUCKLAKE_* / DUCKDB_S3_* variables), never from flags.
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand};

use super::units::{parse_duration, parse_size};

/// Maintenance and lake-state metrics for a Millpond DuckLake.
#[derive(Parser, Debug)]
#[command(name = "millpond-lake", version)]
pub struct Cli {
    /// Run destructive commands without asking (required when stdin is not
    /// a terminal, e.g. in a CronJob).
    #[arg(long, global = true)]
    pub yes: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// A DuckDB shell on the lake, with the writer's session setup.
    Shell {
        /// Run this statement and exit (repeat for several, in order).
        #[arg(long)]
        sql: Vec<String>,
    },
    /// Expire snapshots: older than a duration, or all but the newest N.
    #[command(group(ArgGroup::new("which").required(true).args(["older_than", "keep_last"])))]
    Expire {
        /// e.g. 7d, 12h.
        #[arg(long, value_parser = parse_duration)]
        older_than: Option<Duration>,
        /// Keep the newest N snapshots.
        #[arg(long)]
        keep_last: Option<u64>,
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete files scheduled for deletion (by expiry or compaction).
    Cleanup {
        /// Only files scheduled at least this long ago (readers may still
        /// use younger ones).
        #[arg(long, value_parser = parse_duration, default_value = "1d")]
        older_than: Duration,
        #[arg(long)]
        dry_run: bool,
    },
    /// List files in the data path that no snapshot references.
    FindOrphans {
        /// Only files older than this (younger ones may be uploads about to
        /// commit).
        #[arg(long, value_parser = parse_duration, default_value = "1d")]
        older_than: Duration,
    },
    /// Delete orphaned files (a dry run unless --execute).
    DeleteOrphans {
        #[arg(long, value_parser = parse_duration, default_value = "1d")]
        older_than: Duration,
        /// Delete them; without it the files are only listed.
        #[arg(long)]
        execute: bool,
    },
    /// Check that every referenced file exists with its recorded size, and
    /// that the catalog is consistent. Exits 1 when it finds a problem.
    Fsck {
        /// Skip listing the data path; check the catalog only.
        #[arg(long)]
        catalog_only: bool,
    },
    /// DuckLake's CHECKPOINT (its own chain: flush inlined data, expire,
    /// merge, rewrite, clean up, delete orphans, with the catalog's ages).
    Checkpoint,
    /// Move inlined rows (small inserts kept in the catalog) into Parquet.
    FlushInlined {
        /// `table` (in DUCKLAKE_SCHEMA) or `schema.table`; default all.
        #[arg(long)]
        table: Option<String>,
    },
    /// Tiered compaction: merge small files into medium, medium into large.
    Compact(CompactArgs),
    /// The safe chain: flush inlined rows, compact, expire old snapshots,
    /// delete old scheduled files, and report (never delete) orphans.
    Maintain(MaintainArgs),
    /// Create the catalog btrees on a Postgres catalog (CONCURRENTLY, IF NOT
    /// EXISTS).
    BootstrapIndexes {
        #[arg(long)]
        dry_run: bool,
    },
    /// Lake-state metrics: serve /metrics, or read once (--once) and POST to
    /// DUCKLAKE_METRICS_PUSH_URL (or print).
    Metrics {
        #[arg(long)]
        once: bool,
        /// Overrides DUCKLAKE_METRICS_PUSH_URL.
        #[arg(long, requires = "once")]
        push_url: Option<String>,
    },
}

#[derive(Args, Debug, Clone)]
pub struct CompactArgs {
    /// Tiers to run (1: <1MiB -> 5MiB, 2: 1-10MiB -> 32MiB, 3: 10-64MiB ->
    /// 128MiB); repeat or comma-separate; default all, in order.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=3))]
    pub tier: Vec<u8>,
    /// `table` (in DUCKLAKE_SCHEMA) or `schema.table`; default all.
    #[arg(long)]
    pub table: Option<String>,
    #[arg(long)]
    pub dry_run: bool,
    /// DuckDB threads for the merge.
    #[arg(long)]
    pub threads: Option<u32>,
    /// DuckDB memory limit for the merge, e.g. 4GB.
    #[arg(long, value_parser = memory_limit)]
    pub memory_limit: Option<String>,
    /// At most this many merges per table and tier in one run.
    #[arg(long)]
    pub max_files: Option<u64>,
}

#[derive(Args, Debug, Clone)]
pub struct MaintainArgs {
    #[arg(long, value_parser = parse_duration, default_value = "7d")]
    pub expire_older_than: Duration,
    #[arg(long, value_parser = parse_duration, default_value = "1d")]
    pub cleanup_older_than: Duration,
    #[arg(long, value_parser = parse_duration, default_value = "1d")]
    pub orphans_older_than: Duration,
    /// Leave compaction out of the chain.
    #[arg(long)]
    pub no_compact: bool,
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub threads: Option<u32>,
    #[arg(long, value_parser = memory_limit)]
    pub memory_limit: Option<String>,
}

/// A size DuckDB's memory_limit takes; checked here so it never reaches SQL
/// unvalidated.
fn memory_limit(text: &str) -> Result<String, String> {
    parse_size(text).map(|_| text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn expire_needs_exactly_one_rule() {
        assert!(Cli::try_parse_from(["millpond-lake", "expire"]).is_err());
        assert!(Cli::try_parse_from([
            "millpond-lake",
            "expire",
            "--older-than",
            "7d",
            "--keep-last",
            "3"
        ])
        .is_err());
        let cli =
            Cli::try_parse_from(["millpond-lake", "expire", "--keep-last", "3", "--yes"]).unwrap();
        assert!(cli.yes);
        assert!(matches!(
            cli.command,
            Command::Expire {
                keep_last: Some(3),
                ..
            }
        ));
    }

    #[test]
    fn compact_tiers_and_limits_are_checked() {
        let cli = Cli::try_parse_from(["millpond-lake", "compact", "--tier", "1,2"]).unwrap();
        let Command::Compact(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.tier, [1, 2]);
        assert!(Cli::try_parse_from(["millpond-lake", "compact", "--tier", "4"]).is_err());
        assert!(
            Cli::try_parse_from(["millpond-lake", "compact", "--memory-limit", "4GB; DROP"])
                .is_err()
        );
    }
}
