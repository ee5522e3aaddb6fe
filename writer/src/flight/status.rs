//! Failed writes and refused DoPuts as gRPC statuses: the one place a
//! sink's error becomes a `tonic::Status`, with a `WriteError` in its
//! details.
use arrow_flight::error::FlightError;
use millpond_proto::{ErrorKind, WriteError};
use millpond_shared::metrics::error_type;
use prost::Message;
use std::time::Duration;
use tonic::{Code, Status};

use super::codec::encode_write_error;
use crate::sink::WriteFailure;

/// UNAVAILABLE when resending may succeed, FAILED_PRECONDITION when it
/// cannot; the details say which, and why.
pub fn failure_status(flush_id: &str, f: &WriteFailure) -> Status {
    let kind = if f.error.is_retryable() {
        ErrorKind::Retryable
    } else {
        ErrorKind::Permanent
    };
    let details = WriteError {
        kind: kind as i32,
        error_type: f.error.error_type().to_owned(),
        message: f.error.message.clone(),
        flush_id: flush_id.to_owned(),
    };
    let code = if f.error.is_retryable() {
        Code::Unavailable
    } else {
        Code::FailedPrecondition
    };
    let text = format!(
        "flush {flush_id} not written after {} attempt(s): {}",
        f.attempts, f.error.message
    );
    Status::with_details(code, text, encode_write_error(&details))
}

/// A DoPut past MILLPOND_WRITER_MAX_FLUSH_BYTES: refused as it arrives,
/// nothing written; permanent (the same flush is as large again).
pub fn too_large(flush_id: &str, limit: u64) -> Status {
    let message = format!(
        "flush {flush_id} carries more than MILLPOND_WRITER_MAX_FLUSH_BYTES ({limit} bytes of Arrow data); \
         nothing was written. Raise MILLPOND_WRITER_MAX_FLUSH_BYTES on the writer or lower FLUSH_SIZE on ingest"
    );
    exhausted(
        flush_id,
        ErrorKind::Permanent,
        error_type::FLUSH_TOO_LARGE,
        message,
    )
}

/// A DoPut that alone would hold more than MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES:
/// it could never fit, so it is refused as permanent, not left to be
/// resent forever.
pub fn larger_than_in_flight(flush_id: &str, limit: u64) -> Status {
    let message = format!(
        "flush {flush_id} carries more than MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES ({limit} bytes of Arrow data), \
         which all uploads share; nothing was written. Raise MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES to at least \
         MILLPOND_WRITER_MAX_FLUSH_BYTES, or lower FLUSH_SIZE on ingest"
    );
    exhausted(
        flush_id,
        ErrorKind::Permanent,
        error_type::FLUSH_TOO_LARGE,
        message,
    )
}

/// A DoPut refused because the other uploads hold the writer's in-flight
/// bound: retryable, the sender resends once they end.
pub fn busy(flush_id: &str, limit: u64) -> Status {
    let message = format!(
        "flush {flush_id} refused: the writer's uploads already hold MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES \
         ({limit} bytes of Arrow data); nothing was written, resend later"
    );
    exhausted(
        flush_id,
        ErrorKind::Retryable,
        error_type::IN_FLIGHT_BYTES,
        message,
    )
}

/// A DoPut that sent nothing for MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S: cut,
/// its bytes released, nothing written; retryable.
pub fn idle(flush_id: &str, after: Duration) -> Status {
    let message = format!(
        "flush {flush_id} cut: no message for {} s (MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S); nothing was written",
        after.as_secs()
    );
    exhausted(
        flush_id,
        ErrorKind::Retryable,
        error_type::UPLOAD_IDLE,
        message,
    )
}

fn exhausted(flush_id: &str, kind: ErrorKind, error_type: &str, message: String) -> Status {
    let details = WriteError {
        kind: kind as i32,
        error_type: error_type.to_owned(),
        message: message.clone(),
        flush_id: flush_id.to_owned(),
    };
    Status::with_details(
        Code::ResourceExhausted,
        message,
        details.encode_to_vec().into(),
    )
}

/// The `errors_total{type}` of a DoPut refused before its write: one of the
/// writer's bounds (RESOURCE_EXHAUSTED, named in the details), or a request
/// it could not read.
pub fn refusal_type(status: &Status) -> &'static str {
    if status.code() == Code::ResourceExhausted {
        let named = WriteError::decode(status.details()).map(|w| w.error_type);
        for t in [
            error_type::FLUSH_TOO_LARGE,
            error_type::IN_FLIGHT_BYTES,
            error_type::UPLOAD_IDLE,
        ] {
            if named.as_deref() == Ok(t) {
                return t;
            }
        }
    }
    error_type::FLIGHT_REQUEST
}

pub fn flight_to_status(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(s) => *s,
        other => Status::invalid_argument(format!("bad Flight data: {other}")),
    }
}
