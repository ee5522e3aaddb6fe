//! The write retry loop: the sink's ladder, reset_caches between attempts,
//! classified error counts, and no retry of permanent errors.
use std::time::Duration;

use millpond_shared::metrics::WriterMetrics;

use crate::sink::{Durable, Flush, Receipt, Sink, SinkError};

#[derive(Debug)]
pub struct WriteFailure {
    pub error: SinkError,
    pub attempts: u32,
    /// The ladder ran out (as opposed to a permanent error).
    pub exhausted: bool,
}

/// Writes `flush` with the sink's retry ladder. The flush is borrowed on
/// every attempt, so the same payload is sent each time.
pub fn write_with_retry(
    sink: &mut dyn Sink,
    flush: &Flush,
    metrics: &WriterMetrics,
    sleep: &dyn Fn(Duration),
) -> Result<Durable<Receipt>, WriteFailure> {
    let ladder = sink.retry_ladder();
    let mut failed = 0u32;
    loop {
        match sink.write(flush) {
            Ok(receipt) => return Ok(receipt),
            Err(error) => {
                metrics
                    .errors
                    .with_label_values(&[error.error_type()])
                    .inc();
                let attempts = failed + 1;
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
                tracing::warn!(flush_id = %flush.id, attempt = attempts, delay_ms = delay.as_millis() as u64,
                    error = %error.message, "write failed; retrying");
                sink.reset_caches();
                sleep(delay);
                failed += 1;
            }
        }
    }
}
