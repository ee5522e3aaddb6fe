//! The command line. Where the lake is comes from the environment (the
//! writer's DUCKLAKE_* / DUCKDB_S3_* variables), never from flags.
use std::time::Duration;

use clap::{Parser, Subcommand};

pub use super::cli_args::{CompactArgs, ExpireArgs, MaintainArgs, RetentionArgs};
use super::recipes::RECIPES;
use super::units::parse_duration;

/// Maintenance and lake-state metrics for a Millpond DuckLake.
#[derive(Parser, Debug)]
#[command(name = "millpond-lake", version)]
pub struct Cli {
    /// Run destructive commands without asking (required when stdin is not
    /// a terminal, e.g. in a CronJob).
    #[arg(long, global = true)]
    pub yes: bool,
    /// Commands that change the lake (and a chain that has one) run one at
    /// a time per catalog: each takes the catalog's maintenance lock (a
    /// Postgres advisory lock; beside an embedded catalog, a lock file) and
    /// waits at most this long (e.g. 30s, 10m) for another run to release
    /// it, then exits 1 naming that run. Default MILLPOND_LAKE_LOCK_WAIT, or
    /// 5m. Commands that only read (fsck, find-orphans, compact-probe,
    /// metrics, dry runs), shell and bootstrap-indexes take no lock.
    #[arg(long, global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub lock_wait: Option<Duration>,
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
    /// Expire snapshots with DuckLake's own expiry: older than a duration,
    /// or all but the newest N.
    Expire(ExpireArgs),
    /// Expire snapshots in the catalog's own database, in batches: for a
    /// catalog too large for `expire` (the same result as DuckLake's).
    ExpireSnapshots {
        #[command(flatten)]
        which: ExpireArgs,
        /// Snapshots per transaction.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
        batch_size: u64,
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
    /// Delete every file scheduled for deletion, however recently.
    CleanupAll {
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
    /// Orphans in a table's folder: register those that fit the table and
    /// whose rows it lacks, move the rest aside. Never deletes.
    HealOrphans {
        #[arg(long, value_parser = parse_duration, default_value = "1d")]
        older_than: Duration,
        /// `table` (in DUCKLAKE_SCHEMA) or `schema.table`; default all.
        #[arg(long)]
        table: Option<String>,
        /// Where files are moved aside (default: beside the data path,
        /// `<data path>-quarantine/`).
        #[arg(long)]
        quarantine: Option<String>,
        #[arg(long)]
        dry_run: bool,
    },
    /// Fix deletion bookkeeping held twice: several live delete files for
    /// one data file, a path scheduled twice or while still referenced.
    DedupDeletions {
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove statistics and partition values of files and tables the
    /// catalog no longer has.
    PurgeOrphanStats {
        #[arg(long)]
        dry_run: bool,
    },
    /// Set each live file's partition values from its rows where the
    /// catalog's are missing or wrong.
    RepairPartitionValues {
        /// `table` (in DUCKLAKE_SCHEMA) or `schema.table`; default all.
        #[arg(long)]
        table: Option<String>,
        #[arg(long)]
        dry_run: bool,
    },
    /// The partitions of a table partitioned by year(col)[, month(col)[,
    /// day(col)[, hour(col)]]] whose whole span ended before now minus the
    /// retention; changes nothing. Exits 1 when a file's statistics
    /// disagree with its partition (it is never dropped).
    ListDroppablePartitions(RetentionArgs),
    /// Drop those partitions (a dry run unless --execute): their files end
    /// in one new snapshot, and cleanup deletes them once the snapshots
    /// before it expire.
    DropPartitions {
        #[command(flatten)]
        which: RetentionArgs,
        /// Drop them; without it they are only listed.
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
    /// What each compaction tier would merge, per table; changes nothing.
    CompactProbe {
        /// `table` (in DUCKLAKE_SCHEMA) or `schema.table`; default all.
        #[arg(long)]
        table: Option<String>,
    },
    /// The safe chain: flush inlined rows, compact, expire old snapshots,
    /// delete old scheduled files, and report (never delete) orphans.
    Maintain(MaintainArgs),
    /// Run recipes (commands without arguments) in order, stopping at the
    /// first that fails: one flat chain for a CronJob.
    Run {
        #[arg(required = true, value_parser = clap::builder::PossibleValuesParser::new(RECIPES.iter().map(|r| r.name)))]
        recipes: Vec<String>,
    },
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
        #[arg(long, requires = "once", value_parser = millpond_shared::config::SecretUrl::parse)]
        push_url: Option<millpond_shared::config::SecretUrl>,
    },
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
            Command::Expire(ExpireArgs {
                keep_last: Some(3),
                ..
            })
        ));
        let cli = Cli::try_parse_from([
            "millpond-lake",
            "expire-snapshots",
            "--older-than",
            "7d",
            "--batch-size",
            "50",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Command::ExpireSnapshots { batch_size: 50, .. }
        ));
        assert!(
            Cli::try_parse_from(["millpond-lake", "expire-snapshots", "--batch-size", "5"])
                .is_err()
        );
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
        let cli =
            Cli::try_parse_from(["millpond-lake", "compact", "--memory-limit", "512MiB"]).unwrap();
        let Command::Compact(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.memory_limit.as_deref(), Some("536870912B"));
    }

    #[test]
    fn run_takes_only_recipes() {
        let cli = Cli::try_parse_from([
            "millpond-lake",
            "--yes",
            "run",
            "expire-7d",
            "compact-all-tiers-default",
            "cleanup-all-safe",
        ])
        .unwrap();
        assert!(matches!(cli.command, Command::Run { recipes } if recipes.len() == 3));
        assert!(Cli::try_parse_from(["millpond-lake", "run"]).is_err());
        assert!(Cli::try_parse_from(["millpond-lake", "run", "expire"]).is_err());
    }
}
