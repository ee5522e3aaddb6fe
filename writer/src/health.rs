//! Writer liveness and readiness, reflecting the sink.
use std::sync::Mutex;

use millpond_shared::http::HealthCheck;

#[derive(Default)]
pub struct WriterHealth {
    /// Set when a write exhausted its retries: the process is exiting.
    fatal: Mutex<Option<String>>,
    /// Set while the last write failed and has not yet succeeded.
    degraded: Mutex<Option<String>>,
}

impl WriterHealth {
    pub fn set_fatal(&self, reason: String) {
        *self.fatal.lock().unwrap() = Some(reason);
    }

    pub fn write_failed(&self, reason: String) {
        *self.degraded.lock().unwrap() = Some(reason);
    }

    pub fn write_succeeded(&self) {
        *self.degraded.lock().unwrap() = None;
    }
}

impl HealthCheck for WriterHealth {
    fn live(&self) -> Result<(), String> {
        match &*self.fatal.lock().unwrap() {
            Some(r) => Err(format!("sink failed: {r}")),
            None => Ok(()),
        }
    }

    fn ready(&self) -> Result<(), String> {
        self.live()?;
        match &*self.degraded.lock().unwrap() {
            Some(r) => Err(format!("last write failed: {r}")),
            None => Ok(()),
        }
    }
}
