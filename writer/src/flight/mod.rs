//! The Arrow Flight face of the writer.
//!
//! Contract: one DoPut stream is one flush. The first message carries a
//! FlightDescriptor whose `cmd` is a `FlushDescriptor` (protobuf, or the
//! same fields as JSON for hand-driven clients such as pyarrow). The
//! writer answers with exactly one PutResult once the sink made the flush
//! durable; its app_metadata is a `FlushAck` in the request's encoding. A
//! failed write answers with a status whose details hold a `WriteError`:
//! UNAVAILABLE when resending may succeed, FAILED_PRECONDITION when it
//! cannot. RESOURCE_EXHAUSTED refuses what passes the writer's bounds:
//! permanent for a flush past MILLPOND_WRITER_MAX_FLUSH_BYTES (or alone past
//! MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES), retryable for one that finds the
//! other uploads holding MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES or that sent
//! nothing for MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S.
//! A malformed request is refused with INVALID_ARGUMENT (no details).
//! `do_action("recorded-offsets")` returns the offsets the lake recorded per
//! partition.
mod actions;
mod activity;
mod bounds;
mod budget;
mod codec;
mod receive;
mod server;
mod service;
mod status;
mod write;

pub use codec::Encoding;
pub use server::{serve, ServerHandle};
pub use service::WriterService;

/// Default gRPC message limit: pyarrow sends each batch unsplit.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = i32::MAX as usize;
