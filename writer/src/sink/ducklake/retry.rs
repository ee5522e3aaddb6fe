//! The DuckLake sink's one retry place: its ladder, reset_after between
//! attempts, classified error counts. A permanent-looking error is believed
//! only when it comes from an attempt that started from fresh caches: the
//! first time, the caches are reset and the flush tried again at once,
//! since a stale schema cache or a connection dropped mid-query can look
//! permanent.
//!
//! The sink's [`Deadline`] (made once, when the write begins) bounds every
//! ladder here as it bounds the sink's own: no wait that would end past it,
//! no attempt once it is spent. Giving up at it is fatal like a spent ladder.
use std::cell::Cell;
use std::time::Duration;

use millpond_shared::metrics::WriterMetrics;
use millpond_shared::retry::{Ladder, Stopped, Try, Wait};

use crate::sink::write_failure::{count, is_refusal};
use crate::sink::{Durable, Flush, Receipt, Sink, SinkError, SinkErrorKind, WriteFailure};

/// Commit contention: 8 quick attempts, 50 ms doubling with up to +100 %
/// jitter (about 13 s in all), before an attempt of the outer ladder is spent.
const CONTENTION: Ladder = Ladder {
    attempts: 8,
    base: Duration::from_millis(50),
    jitter: 1.0,
};

/// Writes `flush` with `ladder`. The flush is borrowed on every attempt,
/// so the same payload is sent each time.
pub fn write_with_retry<S: Sink + ?Sized>(
    sink: &mut S,
    ladder: &Ladder,
    flush: &Flush,
    metrics: &WriterMetrics,
    sleep: &dyn Fn(Duration),
) -> Result<Durable<Receipt>, WriteFailure> {
    let deadline = sink.deadline();
    // Whether the last attempt started from fresh caches.
    let fresh = Cell::new(false);
    let tried = ladder.retry_blocking_until(
        &CONTENTION,
        deadline,
        sink,
        |sink, _| match sink.write(flush, deadline) {
            Ok(receipt) => Try::Done(receipt),
            Err(error) => {
                count(metrics, &error);
                judge(error, fresh.get())
            }
        },
        |sink, attempt, wait, delay, error| {
            let delay_ms = delay.as_millis() as u64;
            match wait {
                // Another writer committed first (DDL or the same table):
                // expected with several writers, so it has its own short,
                // jittered budget before the outer ladder counts it.
                Wait::Quick(n) => tracing::info!(flush_id = %flush.id, attempt = n, delay_ms,
                    error = %error.message, "commit contention; retrying against a fresh catalog read"),
                Wait::Again => tracing::warn!(flush_id = %flush.id, attempt, error = %error.message,
                    "write failed; re-reading the catalog before believing the error is permanent"),
                Wait::Retry => tracing::warn!(flush_id = %flush.id, attempt, delay_ms,
                    error = %error.message, "write failed; retrying"),
            }
            sink.reset_after(error);
            if !matches!(wait, Wait::Quick(_)) {
                fresh.set(true);
            }
        },
        sleep,
    );
    tried.map_err(|stopped| match stopped {
        Stopped::Fatal { error, attempts } if error.kind == SinkErrorKind::Deadline => {
            WriteFailure::spent(flush, error, attempts, None, deadline)
        }
        Stopped::Fatal { error, attempts } if is_refusal(&error) => {
            WriteFailure::refused(flush, error, attempts)
        }
        Stopped::Fatal { error, attempts } => WriteFailure::permanent(flush, error, attempts),
        Stopped::Exhausted { error, attempts } => WriteFailure::exhausted(flush, error, attempts),
        Stopped::Deadline {
            error,
            attempts,
            pause,
        } => WriteFailure::spent(
            flush,
            error,
            attempts,
            Some(pause).filter(|p| !p.is_zero()),
            deadline,
        ),
    })
}

/// What a failed attempt means for the next one. A permanent-looking
/// error is believed only from an attempt that started from fresh caches.
fn judge(error: SinkError, fresh: bool) -> Try<Durable<Receipt>, SinkError> {
    if error.kind == SinkErrorKind::Deadline {
        Try::Fatal(error)
    } else if matches!(error.kind, SinkErrorKind::Contention(_)) {
        Try::Quick(error)
    } else if is_refusal(&error) {
        Try::Fatal(error)
    } else if !error.is_retryable() && !fresh {
        Try::Again(error)
    } else if !error.is_retryable() {
        Try::Fatal(error)
    } else {
        let floor = error.retry_after;
        Try::Retry { error, floor }
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
