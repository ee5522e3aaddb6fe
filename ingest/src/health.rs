//! Liveness from the consume loop: healthy while the last poll is recent.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use millpond_shared::http::HealthCheck;

use crate::config::LIVENESS;

pub struct IngestHealth {
    started: AtomicBool,
    last_poll_ms: AtomicU64,
    budget: Duration,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

impl Default for IngestHealth {
    fn default() -> Self {
        IngestHealth {
            started: AtomicBool::new(false),
            last_poll_ms: AtomicU64::new(0),
            budget: LIVENESS,
        }
    }
}

impl IngestHealth {
    /// Called after every consume call, empty or not.
    pub fn record_poll(&self) {
        self.last_poll_ms.store(now_ms(), Ordering::Relaxed);
        self.started.store(true, Ordering::Relaxed);
    }
}

impl HealthCheck for IngestHealth {
    fn live(&self) -> Result<(), String> {
        if !self.started.load(Ordering::Relaxed) {
            return Err("consumer not started".into());
        }
        let age = now_ms().saturating_sub(self.last_poll_ms.load(Ordering::Relaxed));
        if age > self.budget.as_millis() as u64 {
            return Err(format!("last poll {} s ago", age / 1000));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unhealthy_until_first_poll_and_after_budget() {
        let h = IngestHealth {
            budget: Duration::from_millis(50),
            ..Default::default()
        };
        assert!(h.live().is_err());
        h.record_poll();
        assert!(h.live().is_ok());
        std::thread::sleep(Duration::from_millis(80));
        assert!(h.live().unwrap_err().starts_with("last poll"));
    }
}
