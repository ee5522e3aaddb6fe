//! The one deadline rule between the two processes: ingest's send
//! deadline (MILLPOND_WRITER_SEND_DEADLINE_S) must hold the longest write
//! the writer may still be doing (its whole-write budget, answered to
//! "ingest-started") plus [`WRITE_MARGIN`]. Otherwise ingest could give a
//! flush up, and read it again, while the writer is still publishing it.
use std::time::Duration;

use crate::WriterBudget;

/// What the send deadline holds beyond the writer's budget: the flush's
/// way to the writer before its write begins, and the acknowledgement's
/// way back.
pub const WRITE_MARGIN: Duration = Duration::from_secs(20);

impl WriterBudget {
    pub fn new(budget: Duration, set_by: &str) -> Self {
        WriterBudget {
            write_budget_ms: budget.as_millis().try_into().unwrap_or(u64::MAX),
            set_by: set_by.to_owned(),
        }
    }

    pub fn budget(&self) -> Duration {
        Duration::from_millis(self.write_budget_ms)
    }

    /// The least send deadline that holds this budget.
    pub fn least_send_deadline(&self) -> Duration {
        self.budget().saturating_add(WRITE_MARGIN)
    }

    /// Whether `send_deadline` holds a write of this budget; the refusal
    /// names both settings and their numbers.
    pub fn held_by(&self, send_deadline: Duration) -> Result<(), String> {
        if send_deadline >= self.least_send_deadline() {
            return Ok(());
        }
        Err(format!(
            "MILLPOND_WRITER_SEND_DEADLINE_S ({} s) cannot hold a write the writer may still be doing: \
             the writer's whole-write budget is {:.1} s (set by {}), and the send deadline must exceed it \
             by {} s; raise MILLPOND_WRITER_SEND_DEADLINE_S to at least {} s (below the 480 s liveness \
             budget), or lower the writer's budget",
            send_deadline.as_secs(),
            self.budget().as_secs_f64(),
            self.set_by,
            WRITE_MARGIN.as_secs(),
            self.least_send_deadline().as_secs_f64().ceil() as u64,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_deadline_must_hold_the_budget_and_the_margin() {
        let s = Duration::from_secs;
        let hoglake = WriterBudget::new(
            Duration::from_millis(383_750),
            "HOGLAKE_MAX_RETRY_COUNT x HOGLAKE_REQUEST_TIMEOUT_S",
        );
        assert!(hoglake.held_by(s(420)).is_ok(), "the default pair");
        let err = hoglake.held_by(s(400)).unwrap_err();
        for part in [
            "MILLPOND_WRITER_SEND_DEADLINE_S (400 s)",
            "383.8 s",
            "HOGLAKE_MAX_RETRY_COUNT",
            "at least 404 s",
        ] {
            assert!(err.contains(part), "{part:?} not in {err}");
        }
        let ducklake = WriterBudget::new(s(300), "DUCKLAKE_WRITE_BUDGET_S");
        assert!(ducklake.held_by(s(320)).is_ok());
        assert!(ducklake.held_by(s(319)).is_err());
        assert_eq!(
            WriterBudget::new(Duration::MAX, "").budget(),
            Duration::from_millis(u64::MAX)
        );
    }
}
