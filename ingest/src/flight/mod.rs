//! Client side of the Flight contract: send a flush to the writer, whole
//! ([`WriterClient::send`]) or batch by batch as it accumulates
//! ([`WriterClient::open`]), and wait for its durable acknowledgement.
mod answer;
mod client;
mod stream;

pub use answer::{SendError, SHUTDOWN_GRACE};
pub use client::WriterClient;
pub use stream::FlushStream;
