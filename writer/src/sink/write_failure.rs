//! Why a flush was not written, as the writer's Flight service reports it,
//! and how a write gives up: refused for now, permanent, its retries
//! spent, or its deadline.
use std::time::Duration;

use millpond_shared::deadline::Deadline;
use millpond_shared::metrics::WriterMetrics;

use super::error::{SinkError, SinkErrorKind, SinkId};
use super::flush::Flush;

#[derive(Debug)]
pub struct WriteFailure {
    pub error: SinkError,
    pub attempts: u32,
    /// The ladder ran out (as opposed to a permanent error).
    pub exhausted: bool,
}

impl WriteFailure {
    /// A sink's write tried once, for a sink that retries inside its
    /// write: refused, permanent, or spent (its retries, or the deadline).
    pub fn after_one_attempt(
        flush: &Flush,
        error: SinkError,
        metrics: &WriterMetrics,
        deadline: Deadline,
    ) -> WriteFailure {
        count(metrics, &error);
        if error.kind == SinkErrorKind::Deadline {
            return WriteFailure::spent(flush, error, 1, None, deadline);
        }
        if is_refusal(&error) {
            return WriteFailure::refused(flush, error, 1);
        }
        if !error.is_retryable() {
            return WriteFailure::permanent(flush, error, 1);
        }
        WriteFailure::exhausted(flush, error, 1)
    }

    /// The sender resends; waiting here would only hold the sink.
    pub fn refused(flush: &Flush, error: SinkError, attempts: u32) -> WriteFailure {
        tracing::info!(flush_id = %flush.id, error = %error.message, "flush refused for now");
        WriteFailure {
            error,
            attempts,
            exhausted: false,
        }
    }

    pub fn permanent(flush: &Flush, error: SinkError, attempts: u32) -> WriteFailure {
        tracing::error!(flush_id = %flush.id, attempt = attempts, error = %error.message,
            "write failed permanently; not retrying");
        WriteFailure {
            error,
            attempts,
            exhausted: false,
        }
    }

    pub fn exhausted(flush: &Flush, error: SinkError, attempts: u32) -> WriteFailure {
        tracing::error!(flush_id = %flush.id, attempts, error = %error.message,
            "write failed and retries are exhausted");
        WriteFailure {
            error,
            attempts,
            exhausted: true,
        }
    }

    /// Gives up at the deadline: the last error, saying so, as a spent
    /// ladder (the writer exits; the flush is read again from Kafka).
    pub fn spent(
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
}

/// Counts a failed attempt. The hoglake sink counts every 409 its
/// publisher met, retried or not; its failed write is not one more.
pub fn count(metrics: &WriterMetrics, error: &SinkError) {
    if error.kind != SinkErrorKind::Contention(SinkId::Hoglake) {
        metrics
            .errors
            .with_label_values(&[error.error_type()])
            .inc();
    }
}

/// Refused for now: another writer's lease, a streamed flush to send
/// whole, offsets recorded under another cut. Never retried in the writer.
pub fn is_refusal(error: &SinkError) -> bool {
    error.is_refusal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_proto::FlushTrigger;

    /// A sink that retries inside its write is tried once: a spent budget
    /// ends the writer (exhausted), a refusal or a permanent error does
    /// not, and the hoglake publisher's 409s are not counted twice.
    #[test]
    fn one_attempt_gives_up_as_the_error_says() {
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
        let once =
            |e: SinkError| WriteFailure::after_one_attempt(&flush, e, &metrics, Deadline::none());
        let contention = once(SinkError::new(
            SinkErrorKind::Contention(SinkId::Hoglake),
            "409 commit_conflict",
        ));
        assert!(contention.exhausted, "{contention:?}");
        assert_eq!(contention.attempts, 1);
        let hoglake_409s = metrics
            .errors
            .with_label_values(&[millpond_shared::metrics::error_type::HOGLAKE_COMMIT_CONTENTION])
            .get();
        assert_eq!(hoglake_409s, 0, "the publisher counted them");
        assert!(once(SinkError::transient("503")).exhausted);
        assert!(!once(SinkError::permanent("422")).exhausted);
        assert!(!once(SinkError::new(SinkErrorKind::Leased, "held")).exhausted);
        let spent = once(SinkError::new(SinkErrorKind::Deadline, "publish gave up"));
        assert!(spent.exhausted && spent.error.message == "publish gave up");
        assert_eq!(
            metrics
                .errors
                .with_label_values(&[millpond_shared::metrics::error_type::WRITE_RETRY])
                .get(),
            3,
            "the 503, the 422 and the deadline"
        );
    }
}
