//! When a flush is cut: FLUSH_SIZE bytes or FLUSH_INTERVAL_MS, whichever first.
use std::time::Duration;

use millpond_shared::config::EnvReader;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushConfig {
    /// FLUSH_SIZE: bytes of what will be sent (padding included).
    pub size: u64,
    /// FLUSH_INTERVAL_MS.
    pub interval: Duration,
}

impl FlushConfig {
    pub fn from_env(r: &mut EnvReader<'_>) -> FlushConfig {
        FlushConfig {
            size: r.positive_u64("FLUSH_SIZE", 104_857_600),
            interval: Duration::from_millis(r.positive_u64("FLUSH_INTERVAL_MS", 60_000)),
        }
    }
}
