//! The hoglake catalog client: the REST calls the publish path needs
//! (hoglake-api.md sections 4-7), with typed errors.
//!
//! # Async, not blocking
//!
//! The client is async (reqwest's async client). The writer's `Sink` trait
//! is synchronous and runs inside `spawn_blocking`, so a blocking client
//! would look like the natural fit, but:
//! * the object store ([`crate::store`], `object_store`) is async-only, so
//!   the publish path needs a tokio runtime anyway; one async stack for both
//!   halves means one runtime, one connection pool implementation and one
//!   place where timeouts live;
//! * `reqwest::blocking` runs its own hidden runtime thread per client and
//!   panics if it is dropped inside an async context, a trap for a sink that
//!   is constructed and dropped from async code;
//! * a `spawn_blocking` thread may call `tokio::runtime::Handle::block_on`
//!   on the writer's runtime, so the synchronous sink drives
//!   [`crate::publish::Publisher::publish`] with one `block_on` per flush.
//!
//! # Errors
//!
//! Every non-2xx answer becomes [`CatalogError::Api`] carrying the status,
//! the machine code (`error`), the server's detail text (only for humans),
//! the `tables` it names and a parsed `Retry-After`. [`CatalogError::class`]
//! sorts failures into what the caller does next: retry the identical
//! request, re-prepare, or give up at once (section 2 of the API document and
//! millpond.md "Error Handling").

mod client;
mod error;
mod wire;

use std::time::Duration;

pub use client::CatalogClient;
pub use error::{classify, parse_retry_after, CatalogError, ErrorClass};
pub use wire::{AlterOp, Catalog, CommitResult, DataFile};

/// `User-Agent` sent on every request (the server names clients from it).
pub const USER_AGENT: &str = concat!("millpond-hoglake/", env!("CARGO_PKG_VERSION"));

/// Default per-request timeout (HOGLAKE_REQUEST_TIMEOUT_S): above the
/// server's 30 s admission bound, so its 503 + Retry-After can arrive.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(45);

#[cfg(test)]
mod tests;
