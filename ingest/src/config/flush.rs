//! When a flush is cut: FLUSH_SIZE bytes or FLUSH_INTERVAL_MS, whichever first.
use std::time::Duration;

use millpond_shared::config::EnvReader;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushConfig {
    /// FLUSH_SIZE: bytes of what will be sent (padding included).
    pub size: u64,
    /// FLUSH_INTERVAL_MS.
    pub interval: Duration,
    /// MILLPOND_RUN_TO_LATEST: consume up to the high watermarks read at
    /// startup, flush, commit and exit 0 (backfills, benchmarks).
    pub run_to_latest: bool,
}

impl FlushConfig {
    pub fn from_env(r: &mut EnvReader<'_>) -> FlushConfig {
        FlushConfig {
            size: r.positive_u64("FLUSH_SIZE", 104_857_600),
            interval: Duration::from_millis(r.positive_u64("FLUSH_INTERVAL_MS", 60_000)),
            run_to_latest: r.bool_opt("MILLPOND_RUN_TO_LATEST").unwrap_or(false),
        }
    }
}
