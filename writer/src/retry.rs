//! The write retry loop: the sink's ladder, reset_caches between attempts,
//! classified error counts. A permanent-looking error is believed only when
//! it comes from an attempt that started from fresh caches: the first time,
//! the caches are reset and the flush tried again at once, since a stale
//! schema cache or a connection dropped mid-query can look permanent.
//!
//! The sink's [`Deadline`] (made once, when the write begins) bounds every
//! ladder here as it bounds the sink's own: no wait that would end past it,
//! no attempt once it is spent. Giving up at it is fatal like a spent ladder.
use std::time::Duration;

use millpond_shared::deadline::Deadline;
use millpond_shared::metrics::WriterMetrics;
use millpond_shared::retry::Ladder;

use crate::sink::{Durable, Flush, Receipt, Sink, SinkError, SinkErrorKind};

#[derive(Debug)]
pub struct WriteFailure {
    pub error: SinkError,
    pub attempts: u32,
    /// The ladder ran out (as opposed to a permanent error).
    pub exhausted: bool,
}

/// Commit contention: 8 quick attempts, 50 ms doubling with up to +100 %
/// jitter (about 13 s in all), before an attempt of the outer ladder is spent.
const CONTENTION: Ladder = Ladder {
    attempts: 8,
    base: Duration::from_millis(50),
    jitter: 1.0,
};

/// Writes `flush` with the sink's retry ladder. The flush is borrowed on
/// every attempt, so the same payload is sent each time.
pub fn write_with_retry(
    sink: &mut dyn Sink,
    flush: &Flush,
    metrics: &WriterMetrics,
    sleep: &dyn Fn(Duration),
) -> Result<Durable<Receipt>, WriteFailure> {
    let ladder = sink.retry_ladder();
    let deadline = sink.deadline();
    let mut failed = 0u32;
    let mut attempts = 0u32;
    let mut fresh = false;
    let mut contended = 0u32;
    loop {
        attempts += 1;
        match sink.write(flush, deadline) {
            Ok(receipt) => return Ok(receipt),
            Err(error) => {
                // The hoglake sink counts every 409 its publisher met, retried
                // or not; its failed write is not one more.
                if error.kind != SinkErrorKind::Contention(crate::sink::SinkId::Hoglake) {
                    metrics
                        .errors
                        .with_label_values(&[error.error_type()])
                        .inc();
                }
                if error.kind == SinkErrorKind::Deadline {
                    return Err(spent(flush, error, attempts, None, deadline));
                }
                if matches!(error.kind, SinkErrorKind::Contention(_)) {
                    // Another writer committed first (DDL or the same table):
                    // expected with several writers, so it has its own short,
                    // jittered budget before the outer ladder counts it.
                    if let Some(delay) = CONTENTION.delay(contended, None) {
                        if !deadline.allows(delay) {
                            return Err(spent(flush, error, attempts, Some(delay), deadline));
                        }
                        tracing::info!(flush_id = %flush.id, attempt = contended + 1, delay_ms = delay.as_millis() as u64,
                            error = %error.message, "commit contention; retrying against a fresh catalog read");
                        sink.reset_caches();
                        sleep(delay);
                        contended += 1;
                        continue;
                    }
                }
                if matches!(
                    error.kind,
                    SinkErrorKind::Leased | SinkErrorKind::ResendWhole | SinkErrorKind::Overlap
                ) {
                    // The sender resends; waiting here would only hold the sink.
                    tracing::info!(flush_id = %flush.id, error = %error.message, "flush refused for now");
                    return Err(WriteFailure {
                        error,
                        attempts,
                        exhausted: false,
                    });
                }
                if !error.is_retryable() && !fresh {
                    if !deadline.allows(Duration::ZERO) {
                        return Err(spent(flush, error, attempts, None, deadline));
                    }
                    tracing::warn!(flush_id = %flush.id, attempt = attempts, error = %error.message,
                        "write failed; re-reading the catalog before believing the error is permanent");
                    sink.reset_caches();
                    fresh = true;
                    continue;
                }
                if !error.is_retryable() {
                    tracing::error!(flush_id = %flush.id, attempt = attempts, error = %error.message,
                        "write failed permanently; not retrying");
                    return Err(WriteFailure {
                        error,
                        attempts,
                        exhausted: false,
                    });
                }
                let Some(delay) = ladder.delay(failed, error.retry_after) else {
                    tracing::error!(flush_id = %flush.id, attempts, error = %error.message,
                        "write failed and retries are exhausted");
                    return Err(WriteFailure {
                        error,
                        attempts,
                        exhausted: true,
                    });
                };
                if !deadline.allows(delay) {
                    return Err(spent(flush, error, attempts, Some(delay), deadline));
                }
                tracing::warn!(flush_id = %flush.id, attempt = attempts, delay_ms = delay.as_millis() as u64,
                    error = %error.message, "write failed; retrying");
                sink.reset_caches();
                fresh = true;
                sleep(delay);
                failed += 1;
            }
        }
    }
}

/// Gives up at the deadline: the last error, saying so, as a spent ladder
/// (the writer exits; the flush is read again from Kafka).
fn spent(
    flush: &Flush,
    error: SinkError,
    attempts: u32,
    pause: Option<Duration>,
    deadline: Deadline,
) -> WriteFailure {
    let message = if error.kind == SinkErrorKind::Deadline {
        error.message
    } else {
        let next = pause.map_or(String::new(), |p| format!(" ({p:?} wait)"));
        format!(
            "{deadline} leaves no time for the next attempt{next}; last error: {}",
            error.message
        )
    };
    tracing::error!(flush_id = %flush.id, attempts, error = %message, "write gave up at its deadline");
    WriteFailure {
        error: SinkError {
            kind: SinkErrorKind::Deadline,
            message,
            retry_after: None,
        },
        attempts,
        exhausted: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_proto::{AckOutcome, FlushTrigger, OffsetRange};
    use millpond_shared::retry::Ladder;
    use std::cell::Cell;

    /// Fails with the scripted errors in turn, then succeeds.
    struct Scripted {
        errors: Vec<SinkError>,
        resets: Cell<u32>,
        /// The budget of [`Sink::deadline`]; `None`: no deadline.
        budget: Option<Duration>,
    }

    impl Sink for Scripted {
        fn deadline(&self) -> Deadline {
            self.budget
                .map_or_else(Deadline::none, |b| Deadline::after(b, "A_BUDGET"))
        }
        fn write(&mut self, _: &Flush, _: Deadline) -> Result<Durable<Receipt>, SinkError> {
            if self.errors.is_empty() {
                return Ok(Durable::new(Receipt {
                    rows_written: 0,
                    dead_letters_written: 0,
                    outcome: AckOutcome::Written,
                    table: "t".into(),
                    snapshot_id: None,
                    recorded: vec![],
                    recorded_by_another_flush: false,
                }));
            }
            Err(self.errors.remove(0))
        }
        fn reset_caches(&mut self) {
            self.resets.set(self.resets.get() + 1);
        }
        fn recorded_offsets(&mut self, _: &str) -> Result<Vec<OffsetRange>, SinkError> {
            Ok(vec![])
        }
        fn retry_ladder(&self) -> Ladder {
            Ladder::LAKE_WRITE
        }
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn close(&mut self) -> Result<(), SinkError> {
            Ok(())
        }
    }

    fn run(errors: Vec<SinkError>) -> (Result<(), WriteFailure>, u32) {
        run_within(errors, None)
    }

    fn run_within(
        errors: Vec<SinkError>,
        budget: Option<Duration>,
    ) -> (Result<(), WriteFailure>, u32) {
        let mut sink = Scripted {
            errors,
            resets: Cell::new(0),
            budget,
        };
        let flush = Flush {
            id: "f".into(),
            trigger: FlushTrigger::Size,
            ranges: vec![],
            schema: std::sync::Arc::new(arrow::datatypes::Schema::empty()),
            batches: vec![],
            dead_letters: vec![],
            streamed: None,
        };
        let metrics = WriterMetrics::new(&millpond_shared::metrics::new_registry("p", "b"));
        let r = write_with_retry(&mut sink, &flush, &metrics, &|_| {}).map(|_| ());
        (r, sink.resets.get())
    }

    #[test]
    fn a_permanent_looking_error_is_retried_once_from_fresh_caches() {
        let (r, resets) = run(vec![SinkError::permanent("Binder Error: stale")]);
        assert!(r.is_ok());
        assert_eq!(resets, 1);
        let (r, resets) = run(vec![
            SinkError::permanent("Binder Error: stale"),
            SinkError::permanent("Conversion Error: for real"),
        ]);
        let f = r.unwrap_err();
        assert_eq!((f.attempts, f.exhausted, resets), (2, false, 1));
    }

    #[test]
    fn contention_has_its_own_budget_before_the_ladder() {
        let contention = || {
            SinkError::new(
                SinkErrorKind::Contention(crate::sink::SinkId::DuckLake),
                "Transaction conflict",
            )
        };
        // Seven conflicts in a row, then the commit goes through.
        let (r, _) = run((0..7).map(|_| contention()).collect());
        assert!(r.is_ok());
        // Endless conflicts: the contention budget (7 retries), then the
        // outer ladder (3 attempts) is spent.
        let (r, _) = run((0..40).map(|_| contention()).collect());
        let f = r.unwrap_err();
        assert!(f.exhausted, "{f:?}");
        assert_eq!(f.attempts, 7 + 3);
    }

    /// No ladder of the writer's waits or tries again past the deadline:
    /// endless contention against a spent deadline is one attempt, given
    /// up as exhausted (the writer exits), saying which deadline.
    #[test]
    fn every_ladder_stops_at_the_deadline() {
        let contention = || {
            SinkError::new(
                SinkErrorKind::Contention(crate::sink::SinkId::Hoglake),
                "409 commit_conflict",
            )
        };
        let spent = Some(Duration::ZERO);
        for errors in [
            (0..40).map(|_| contention()).collect::<Vec<_>>(),
            vec![SinkError::transient("503"); 5],
            vec![SinkError::permanent("Binder Error: stale"); 2],
        ] {
            let (r, _) = run_within(errors, spent);
            let f = r.unwrap_err();
            assert!(f.exhausted && f.error.is_retryable(), "{f:?}");
            assert_eq!((f.attempts, f.error.kind), (1, SinkErrorKind::Deadline));
            assert!(f.error.message.contains("A_BUDGET"), "{f:?}");
        }
        // Time left: the contention budget runs as before.
        let (r, _) = run_within(
            (0..7).map(|_| contention()).collect(),
            Some(Duration::from_secs(60)),
        );
        assert!(r.is_ok());
        // A sink that gave up at the deadline itself is not tried again.
        let (r, _) = run_within(
            vec![SinkError::new(SinkErrorKind::Deadline, "publish gave up")],
            Some(Duration::from_secs(60)),
        );
        let f = r.unwrap_err();
        assert!(f.exhausted, "{f:?}");
        assert_eq!(
            (f.attempts, f.error.message.as_str()),
            (1, "publish gave up")
        );
    }

    #[test]
    fn a_lost_connection_behind_a_permanent_looking_error_exhausts_the_ladder() {
        let (r, _) = run(vec![
            SinkError::permanent("Binder Error: SSL error: unexpected eof"),
            SinkError::transient("Connection refused"),
            SinkError::transient("Connection refused"),
            SinkError::transient("Connection refused"),
        ]);
        let f = r.unwrap_err();
        assert!(f.exhausted && f.error.is_retryable(), "{f:?}");
        assert_eq!(f.attempts, 4);
    }
}
