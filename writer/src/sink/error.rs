use std::time::Duration;

use millpond_shared::metrics::error_type;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkErrorKind {
    /// Commit contention on the catalog: worth retrying.
    Contention,
    /// Storage, catalog or network trouble: worth retrying.
    Transient,
    /// The same request can never succeed: do not retry.
    Permanent,
    /// Another writer holds the lease of a partition in the flush: the
    /// sender should resend later (after the lease ends or is released).
    /// Not retried inside the writer and never fatal to it.
    Leased,
}

/// A failed write. Messages are scrubbed of secrets before construction.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct SinkError {
    pub kind: SinkErrorKind,
    pub message: String,
    /// Server-given floor under the next delay (Retry-After).
    pub retry_after: Option<Duration>,
}

impl SinkError {
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(SinkErrorKind::Transient, message)
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(SinkErrorKind::Permanent, message)
    }

    pub fn new(kind: SinkErrorKind, message: impl Into<String>) -> Self {
        SinkError {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn is_retryable(&self) -> bool {
        self.kind != SinkErrorKind::Permanent
    }

    /// Label for `millpond_errors_total{type}`.
    pub fn error_type(&self) -> &'static str {
        match self.kind {
            SinkErrorKind::Contention => error_type::DUCKLAKE_COMMIT_CONTENTION,
            SinkErrorKind::Leased => error_type::PARTITION_LEASED,
            SinkErrorKind::Transient | SinkErrorKind::Permanent => error_type::WRITE_RETRY,
        }
    }
}
