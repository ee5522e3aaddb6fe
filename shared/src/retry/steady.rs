//! A steady ladder: a period to poll on, not a backoff.
use std::time::Duration;

use rand::Rng;

use super::Ladder;

impl Ladder {
    /// A steady ladder's wait: the same after every attempt, `base` spread
    /// both ways by `jitter` (0.1 = 90% to 110%), with no ceiling: for a
    /// loop that polls on a period rather than backing off.
    pub fn steady_delay(&self) -> Duration {
        let j = self.jitter.abs();
        if j == 0.0 {
            return self.base;
        }
        self.base
            .mul_f64(rand::rng().random_range(1.0 - j..1.0 + j))
    }
}

#[cfg(test)]
mod steady_tests {
    use super::*;

    #[test]
    fn steady_delay_spreads_both_ways_and_never_grows() {
        let l = Ladder {
            attempts: u32::MAX,
            base: Duration::from_secs(60),
            jitter: 0.1,
        };
        let waits: Vec<Duration> = (0..400).map(|_| l.steady_delay()).collect();
        assert!(waits
            .iter()
            .all(|d| *d >= Duration::from_secs(54) && *d < Duration::from_secs(66)));
        assert!(waits.iter().any(|d| *d < l.base) && waits.iter().any(|d| *d > l.base));
        let still = Ladder { jitter: 0.0, ..l };
        assert_eq!(still.steady_delay(), Duration::from_secs(60));
    }
}
