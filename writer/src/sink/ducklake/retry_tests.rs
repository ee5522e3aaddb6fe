use super::*;
use crate::sink::SinkError;
use millpond_proto::{AckOutcome, FlushTrigger, OffsetRange};
use millpond_shared::deadline::Deadline;
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

fn run_within(errors: Vec<SinkError>, budget: Option<Duration>) -> (Result<(), WriteFailure>, u32) {
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
        dead_letters: Default::default(),
        streamed: None,
    };
    let metrics = WriterMetrics::new(&millpond_shared::metrics::new_registry("p", "b"));
    let r = write_with_retry(&mut sink, &Ladder::LAKE_WRITE, &flush, &metrics, &|_| {}).map(|_| ());
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
