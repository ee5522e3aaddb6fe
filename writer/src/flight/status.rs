//! Failed writes and refused DoPuts as gRPC statuses: the one place a
//! sink's error becomes a `tonic::Status`, with a `WriteError` in its
//! details.
use arrow_flight::error::FlightError;
use millpond_proto::{ErrorKind, WriteError};
use millpond_shared::metrics::error_type;
use prost::Message;
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
    let details = WriteError {
        kind: ErrorKind::Permanent as i32,
        error_type: error_type::FLUSH_TOO_LARGE.to_owned(),
        message: message.clone(),
        flush_id: flush_id.to_owned(),
    };
    Status::with_details(
        Code::ResourceExhausted,
        message,
        details.encode_to_vec().into(),
    )
}

pub fn flight_to_status(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(s) => *s,
        other => Status::invalid_argument(format!("bad Flight data: {other}")),
    }
}
