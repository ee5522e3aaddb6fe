//! What the writer answered, and how long ingest waits for it: the
//! errors of a send, the one rule for waits once the stop came, and the
//! reading of a DoPut's answer.
use std::time::Duration;

use arrow_flight::error::FlightError;
use millpond_proto::{AckOutcome, ErrorKind, FlushAck, WriteError};
use millpond_shared::shutdown::{Stop, Stopped};
use prost::Message;

pub(super) type Attempt<T> = millpond_shared::retry::Attempt<T, SendError>;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The writer judged the flush unwritable; resending cannot help.
    #[error("writer refused flush permanently ({error_type}): {message}")]
    Permanent { error_type: String, message: String },
    /// No acknowledgement before the deadline.
    #[error("no acknowledgement within {0:?}: {1}")]
    Deadline(Duration, String),
    /// A streamed flush lost its stream; the writer wrote nothing of it,
    /// or wrote all of it and the ack was lost.
    #[error("the flush stream broke: {0}")]
    Broken(String),
    /// Ingest is stopping and the writer did not answer in time (see
    /// [`AfterStop`]).
    #[error("gave up waiting for the writer")]
    Stopped(#[from] Stopped),
}

/// How long a flush still waits for the writer once SIGTERM (or SIGINT)
/// came: well under Kubernetes' default terminationGracePeriodSeconds
/// (30 s). A flush not acknowledged by then is given up: nothing of it is
/// committed to Kafka, so it is read again at the next start.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// How long a wait for the writer goes on once the stop came: the one rule
/// for every call of the Flight client.
#[derive(Debug, Clone, Copy)]
pub(super) enum AfterStop {
    /// Nothing consumed depends on it (reading the lake's offsets): it
    /// ends at the stop.
    Ends,
    /// Delivering a flush, or saying this ingest stopped: it may go on
    /// until [`SHUTDOWN_GRACE`] after the stop.
    Grace,
}

/// Runs `wait` until it ends, or until `stop` (if any) says it must give
/// up, as `after` says.
pub(super) async fn unless_stopped<T>(
    stop: Option<&Stop>,
    after: AfterStop,
    wait: impl std::future::Future<Output = Result<T, SendError>>,
) -> Result<T, SendError> {
    let Some(stop) = stop else {
        return wait.await;
    };
    let grace = match after {
        AfterStop::Ends => Duration::ZERO,
        AfterStop::Grace => SHUTDOWN_GRACE,
    };
    tokio::select! {
        done = wait => done,
        () = stop.after(grace) => Err(Stopped.into()),
    }
}

pub(super) const NO_ACK: &str = "writer answered without an acknowledgement";

/// The acknowledgement in a DoPut's answer, if it holds one.
pub(super) fn ack_of(results: &[arrow_flight::PutResult]) -> Option<FlushAck> {
    results
        .first()
        .and_then(|r| FlushAck::decode(r.app_metadata.as_ref()).ok())
        .filter(|ack| ack.outcome() != AckOutcome::Unspecified)
}

pub(super) fn classify<T>(e: FlightError) -> Attempt<T> {
    if let FlightError::Tonic(status) = &e {
        if let Ok(w) = WriteError::decode(status.details()) {
            if !status.details().is_empty() && w.kind() == ErrorKind::Permanent {
                return Attempt::Fatal(SendError::Permanent {
                    error_type: w.error_type,
                    message: w.message,
                });
            }
        }
        if matches!(
            status.code(),
            tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition
        ) {
            return Attempt::Fatal(SendError::Permanent {
                error_type: "rejected".into(),
                message: status.message().to_owned(),
            });
        }
    }
    Attempt::Retry(e.to_string())
}
