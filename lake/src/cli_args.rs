//! The argument groups of the longer subcommands.
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::expire::Expire;
use super::units::parse_duration;
use millpond_writer::lake_api::memory_limit;

/// Which snapshots to expire: exactly one rule.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("which").required(true).args(["older_than", "keep_last"])))]
pub struct ExpireArgs {
    /// e.g. 7d, 12h.
    #[arg(long, value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Keep the newest N snapshots.
    #[arg(long)]
    pub keep_last: Option<u64>,
    #[arg(long)]
    pub dry_run: bool,
}

impl ExpireArgs {
    pub fn which(&self) -> Expire {
        match (self.older_than, self.keep_last) {
            (Some(age), _) => Expire::OlderThan(age),
            (None, Some(n)) => Expire::KeepLast(n),
            (None, None) => unreachable!("clap requires one"),
        }
    }
}

/// A table and a retention, for the partition retention commands.
#[derive(Args, Debug, Clone)]
pub struct RetentionArgs {
    /// `table` (in DUCKLAKE_SCHEMA) or `schema.table`; default
    /// DUCKLAKE_TABLE.
    #[arg(long)]
    pub table: Option<String>,
    /// Drop partitions that ended at least this long ago (at least 1h),
    /// e.g. 90d; default MILLPOND_LAKE_RETENTION.
    #[arg(long, value_parser = parse_retention)]
    pub older_than: Option<Duration>,
}

fn parse_retention(text: &str) -> Result<Duration, String> {
    crate::retention::check_retention(parse_duration(text)?)
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
