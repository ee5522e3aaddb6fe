//! The DuckLake sink: DuckDB with the ducklake extension, catalog in a local
//! file or Postgres, data in a folder or on S3.
//!
//! A write stages the Arrow batches in the session's own database, then in
//! one lake transaction inserts them by name (stamping `_inserted_at`),
//! stores the flush's dead letters and records its offset ranges. A flush
//! whose ranges the lake already holds is acknowledged without writing,
//! which makes resends after a writer crash exactly-once.
mod caches;
pub(crate) mod catalog_indexes;
pub(crate) mod classify;
mod commit_lock;
pub mod config;
pub mod connect;
mod counts;
mod dead_letters;
mod dual_write;
mod fence;
mod insert;
mod lake;
pub mod lake_config;
pub mod lease_owner;
mod leases;
pub mod names;
mod offsets;
pub mod partition_by;
mod pg_tls;
mod recorded;
mod retry;
pub mod session;
mod sink;
pub(crate) mod spool;
pub mod sql;
mod streamed;
mod table;
mod to_live;
mod transaction;
mod types;
mod variant;
mod views;

pub use connect::extensions;
pub use sink::DuckLakeSink;
