//! The ingest crate's integration tests, one test binary; each module was a
//! binary of its own.
mod dead_letter_cost;
mod hostile_soak;
mod reread;
mod retention;
mod stream_refused;
