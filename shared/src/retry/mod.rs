//! Retry ladders with upward jitter.
//!
//! Delays only ever grow by the jitter (0..=25%), so a fleet refused by one
//! event spreads out instead of retrying in lockstep, and no pod retries
//! sooner than the ladder says.
use std::time::Duration;

use rand::Rng;

/// Ceiling for any single delay, jitter included.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Ladder {
    /// Total attempts, the first included.
    pub attempts: u32,
    /// Delay after the first failure; doubles after each later failure.
    pub base: Duration,
    /// Upward jitter as a fraction of the delay (0.25 = up to +25%).
    pub jitter: f64,
}

impl Ladder {
    /// Lake writes: 3 attempts, 1 s then 2 s.
    pub const LAKE_WRITE: Ladder = Ladder {
        attempts: 3,
        base: Duration::from_secs(1),
        jitter: 0.25,
    };
    /// Kafka offset commits: 3 attempts, 0.5 s then 1 s.
    pub const OFFSET_COMMIT: Ladder = Ladder {
        attempts: 3,
        base: Duration::from_millis(500),
        jitter: 0.0,
    };

    /// Delay after failed attempt `failed` (0-based), or None when the
    /// ladder is exhausted. `floor` is a server-given Retry-After.
    pub fn delay(&self, failed: u32, floor: Option<Duration>) -> Option<Duration> {
        if failed + 1 >= self.attempts {
            return None;
        }
        let exp = self.base.saturating_mul(1u32 << failed.min(20));
        let mut d = exp.min(MAX_DELAY);
        if let Some(f) = floor {
            d = d.max(f);
        }
        let factor = 1.0 + rand::rng().random_range(0.0..=self.jitter.max(0.0));
        Some(
            d.mul_f64(factor)
                .min(MAX_DELAY.max(floor.unwrap_or_default())),
        )
    }
}

mod blocking;
mod steady;
mod until;
mod within;

pub use blocking::{Try, Wait};
pub use until::{Step, StepFuture, Stopped};
pub use within::{Attempt, AttemptFuture, GaveUp};

#[cfg(test)]
mod tests;
