//! The DuckLake sink's one retry place: its ladder, reset_caches between
//! attempts, classified error counts. A permanent-looking error is believed
//! only when it comes from an attempt that started from fresh caches: the
//! first time, the caches are reset and the flush tried again at once,
//! since a stale schema cache or a connection dropped mid-query can look
//! permanent.
//!
//! The sink's [`Deadline`] (made once, when the write begins) bounds every
//! ladder here as it bounds the sink's own: no wait that would end past it,
//! no attempt once it is spent. Giving up at it is fatal like a spent ladder.
use std::time::Duration;

use millpond_shared::metrics::WriterMetrics;
use millpond_shared::retry::Ladder;

use crate::sink::write_failure::{count, is_refusal};
use crate::sink::{Durable, Flush, Receipt, Sink, SinkErrorKind, WriteFailure};

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
    let mut failed = 0u32;
    let mut attempts = 0u32;
    let mut fresh = false;
    let mut contended = 0u32;
    loop {
        attempts += 1;
        let error = match sink.write(flush, deadline) {
            Ok(receipt) => return Ok(receipt),
            Err(error) => error,
        };
        count(metrics, &error);
        if error.kind == SinkErrorKind::Deadline {
            return Err(WriteFailure::spent(flush, error, attempts, None, deadline));
        }
        if matches!(error.kind, SinkErrorKind::Contention(_)) {
            // Another writer committed first (DDL or the same table):
            // expected with several writers, so it has its own short,
            // jittered budget before the outer ladder counts it.
            if let Some(delay) = CONTENTION.delay(contended, None) {
                if !deadline.allows(delay) {
                    return Err(WriteFailure::spent(
                        flush,
                        error,
                        attempts,
                        Some(delay),
                        deadline,
                    ));
                }
                tracing::info!(flush_id = %flush.id, attempt = contended + 1, delay_ms = delay.as_millis() as u64,
                    error = %error.message, "commit contention; retrying against a fresh catalog read");
                sink.reset_caches();
                sleep(delay);
                contended += 1;
                continue;
            }
        }
        if is_refusal(&error) {
            return Err(WriteFailure::refused(flush, error, attempts));
        }
        if !error.is_retryable() && !fresh {
            if !deadline.allows(Duration::ZERO) {
                return Err(WriteFailure::spent(flush, error, attempts, None, deadline));
            }
            tracing::warn!(flush_id = %flush.id, attempt = attempts, error = %error.message,
                "write failed; re-reading the catalog before believing the error is permanent");
            sink.reset_caches();
            fresh = true;
            continue;
        }
        if !error.is_retryable() {
            return Err(WriteFailure::permanent(flush, error, attempts));
        }
        let Some(delay) = ladder.delay(failed, error.retry_after) else {
            return Err(WriteFailure::exhausted(flush, error, attempts));
        };
        if !deadline.allows(delay) {
            return Err(WriteFailure::spent(
                flush,
                error,
                attempts,
                Some(delay),
                deadline,
            ));
        }
        tracing::warn!(flush_id = %flush.id, attempt = attempts, delay_ms = delay.as_millis() as u64,
            error = %error.message, "write failed; retrying");
        sink.reset_caches();
        fresh = true;
        sleep(delay);
        failed += 1;
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
