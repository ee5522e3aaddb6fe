//! Writer liveness and readiness, reflecting the sink. The bodies say the
//! state and the failure's kind only: a sink's message can quote what it
//! refused, and stays in the writer's log.
use std::sync::Mutex;

use millpond_shared::http::HealthCheck;

use crate::sink::SinkErrorKind;

#[derive(Default)]
pub struct WriterHealth {
    /// Set when a write exhausted its retries: the process is exiting.
    fatal: Mutex<Option<SinkErrorKind>>,
    /// Set while the last write failed and has not yet succeeded.
    degraded: Mutex<Option<SinkErrorKind>>,
    /// Writes refused permanently in a row.
    refused: Mutex<u32>,
}

/// Permanent refusals in a row, with no write succeeding in between, after
/// which the writer stops reporting live: its ingest keeps resending a flush
/// it cannot write (a wedged partition), which must not look healthy.
pub const REFUSALS_BEFORE_UNHEALTHY: u32 = 3;

impl WriterHealth {
    pub fn set_fatal(&self, kind: SinkErrorKind) {
        *self.fatal.lock().unwrap() = Some(kind);
    }

    pub fn write_failed(&self, kind: SinkErrorKind) {
        if kind == SinkErrorKind::Permanent {
            *self.refused.lock().unwrap() += 1;
        }
        *self.degraded.lock().unwrap() = Some(kind);
    }

    pub fn write_succeeded(&self) {
        *self.degraded.lock().unwrap() = None;
        *self.refused.lock().unwrap() = 0;
    }
}

impl HealthCheck for WriterHealth {
    fn live(&self) -> Result<(), String> {
        if let Some(kind) = *self.fatal.lock().unwrap() {
            return Err(format!(
                "sink failed ({}): the writer is exiting; its log says why",
                kind.name()
            ));
        }
        let n = *self.refused.lock().unwrap();
        if n >= REFUSALS_BEFORE_UNHEALTHY {
            return Err(format!(
                "{n} flushes in a row refused permanently, none written since; the writer's log says why"
            ));
        }
        Ok(())
    }

    fn ready(&self) -> Result<(), String> {
        self.live()?;
        match *self.degraded.lock().unwrap() {
            Some(kind) => Err(format!(
                "last write failed ({}); the writer's log says why",
                kind.name()
            )),
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
        h.write_failed(SinkErrorKind::Transient);
        h.write_failed(SinkErrorKind::Transient);
        h.write_failed(SinkErrorKind::Transient);
        assert!(h.live().is_ok(), "transient failures leave liveness alone");
        assert_eq!(
            h.ready().unwrap_err(),
            "last write failed (transient); the writer's log says why"
        );
        for _ in 0..REFUSALS_BEFORE_UNHEALTHY - 1 {
            h.write_failed(SinkErrorKind::Permanent);
        }
        assert!(h.live().is_ok(), "one bad replay is not a wedge");
        h.write_failed(SinkErrorKind::Permanent);
        assert!(h.live().unwrap_err().starts_with("3 flushes in a row"));
        h.write_succeeded();
        assert!(h.live().is_ok() && h.ready().is_ok());
        h.set_fatal(SinkErrorKind::Deadline);
        assert_eq!(
            h.live().unwrap_err(),
            "sink failed (deadline): the writer is exiting; its log says why"
        );
    }
}
