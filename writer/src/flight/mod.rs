//! The Arrow Flight face of the writer.
//!
//! Contract: one DoPut stream is one flush. The first message carries a
//! FlightDescriptor whose `cmd` is a `FlushDescriptor` (protobuf, or the
//! same fields as JSON for hand-driven clients such as pyarrow). The
//! writer answers with exactly one PutResult once the sink made the flush
//! durable; its app_metadata is a `FlushAck` in the request's encoding. A
//! failed write answers with a status whose details hold a `WriteError`:
//! UNAVAILABLE when resending may succeed, FAILED_PRECONDITION when it
//! cannot, RESOURCE_EXHAUSTED for a flush past MILLPOND_WRITER_MAX_FLUSH_BYTES.
//! A malformed request is refused with INVALID_ARGUMENT (no details).
//! `do_action("recorded-offsets")` returns the offsets the lake recorded per
//! partition.
mod actions;
mod activity;
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
