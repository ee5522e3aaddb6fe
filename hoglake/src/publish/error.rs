//! Why a publish failed, and what the caller does next.
use std::time::Duration;

use millpond_shared::deadline::Deadline;

use crate::catalog::{CatalogError, ErrorClass};
use crate::store::StoreError;

/// Why a publish failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("encoding the flush for {table}: {source}")]
    Encode {
        table: String,
        #[source]
        source: crate::Error,
    },
    #[error("{0}")]
    Schema(String),
    /// The flush reaches into offsets another flush recorded without
    /// matching them: publishing would duplicate rows, acknowledging would
    /// lose some. The sender proves the recorded ranges against Kafka and
    /// sends only the rest.
    #[error("{0}")]
    Overlap(String),
    /// The server lacks what the configuration needs.
    #[error("{0}")]
    Unsupported(String),
    /// The live partition spec or sort order differs from config.
    #[error("{0}")]
    Layout(String),
    #[error("publishing to {table} failed after {attempts} attempts (HOGLAKE_MAX_RETRY_COUNT); last error: {last}")]
    Exhausted {
        table: String,
        attempts: u32,
        #[source]
        last: Box<PublishError>,
    },
    /// The next wait would end past the write's deadline: given up early,
    /// with the last error.
    #[error("{what} {table} gave up after {attempts} attempt(s): {deadline} leaves no time for the next wait ({pause:?}) and attempt; last error: {last}")]
    DeadlineSpent {
        what: &'static str,
        table: String,
        attempts: u32,
        deadline: Deadline,
        pause: Duration,
        #[source]
        last: Box<PublishError>,
    },
}

impl PublishError {
    pub fn class(&self) -> ErrorClass {
        match self {
            PublishError::Catalog(e) => e.class(),
            // Uploads fail on transient network and throttling errors; a
            // missing grant keeps failing until the budget is spent.
            PublishError::Store(StoreError::Upload { .. } | StoreError::Cut { .. }) => {
                ErrorClass::Retry
            }
            PublishError::Store(_) => ErrorClass::Permanent,
            PublishError::Encode { .. }
            | PublishError::Schema(_)
            | PublishError::Layout(_)
            | PublishError::Overlap(_)
            | PublishError::Unsupported(_) => ErrorClass::Permanent,
            PublishError::Exhausted { .. } | PublishError::DeadlineSpent { .. } => {
                ErrorClass::Permanent
            }
        }
    }

    pub(super) fn retry_after(&self) -> Option<Duration> {
        match self {
            PublishError::Catalog(e) => e.retry_after(),
            _ => None,
        }
    }
}
