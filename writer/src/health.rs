//! Writer liveness and readiness, reflecting the sink.
use std::sync::Mutex;

use millpond_shared::http::HealthCheck;

#[derive(Default)]
pub struct WriterHealth {
    /// Set when a write exhausted its retries: the process is exiting.
    fatal: Mutex<Option<String>>,
    /// Set while the last write failed and has not yet succeeded.
    degraded: Mutex<Option<String>>,
    /// Writes refused permanently in a row, with the last reason.
    refused: Mutex<(u32, String)>,
}

/// Permanent refusals in a row, with no write succeeding in between, after
/// which the writer stops reporting live: its ingest keeps resending a flush
/// it cannot write (a wedged partition), which must not look healthy.
pub const REFUSALS_BEFORE_UNHEALTHY: u32 = 3;

impl WriterHealth {
    pub fn set_fatal(&self, reason: String) {
        *self.fatal.lock().unwrap() = Some(reason);
    }

    pub fn write_failed(&self, reason: String, permanent: bool) {
        if permanent {
            let mut refused = self.refused.lock().unwrap();
            *refused = (refused.0 + 1, reason.clone());
        }
        *self.degraded.lock().unwrap() = Some(reason);
    }

    pub fn write_succeeded(&self) {
        *self.degraded.lock().unwrap() = None;
        *self.refused.lock().unwrap() = (0, String::new());
    }
}

impl HealthCheck for WriterHealth {
    fn live(&self) -> Result<(), String> {
        if let Some(r) = &*self.fatal.lock().unwrap() {
            return Err(format!("sink failed: {r}"));
        }
        let (n, reason) = &*self.refused.lock().unwrap();
        if *n >= REFUSALS_BEFORE_UNHEALTHY {
            return Err(format!(
                "{n} flushes in a row refused permanently, none written since; last: {reason}"
            ));
        }
        Ok(())
    }

    fn ready(&self) -> Result<(), String> {
        self.live()?;
        match &*self.degraded.lock().unwrap() {
            Some(r) => Err(format!("last write failed: {r}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_permanent_refusals_stop_liveness_until_a_write_succeeds() {
        let h = WriterHealth::default();
        h.write_failed("outage".into(), false);
        h.write_failed("outage".into(), false);
        h.write_failed("outage".into(), false);
        assert!(h.live().is_ok(), "transient failures leave liveness alone");
        assert!(h.ready().is_err());
        for _ in 0..REFUSALS_BEFORE_UNHEALTHY - 1 {
            h.write_failed("Conversion Error".into(), true);
        }
        assert!(h.live().is_ok(), "one bad replay is not a wedge");
        h.write_failed("Conversion Error".into(), true);
        assert!(h.live().unwrap_err().contains("Conversion Error"));
        h.write_succeeded();
        assert!(h.live().is_ok() && h.ready().is_ok());
    }
}
