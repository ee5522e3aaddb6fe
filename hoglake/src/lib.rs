//! The hoglake wire encoding: everything needed to turn Arrow batches into
//! the data files and file registrations a hoglake catalog accepts, in the
//! same form as the official Python client (pyhoglake 1.3.11), so files
//! written here and by Python writers share partitions and statistics.
//!
//! What it does:
//! * [`schema`]: table definitions as the catalog sends them (columns with
//!   field ids, the 27 types, partition and sort specs);
//!   [`arrow_schema`]: catalog columns <-> Arrow schema, with the field ids
//!   in `PARQUET:field_id`, and conforming a batch to a table's file schema;
//! * [`parquet_file`]: one parquet object in memory, laid out like
//!   pyhoglake's, with its footer size and row count;
//! * [`stats`] / [`bounds`]: per-leaf statistics from the footer, bounds in
//!   Iceberg's single-value encoding (base64);
//! * [`partition`] / [`partition_value`]: identity, year, month, day, hour
//!   and bucket transforms, the value strings pyhoglake registers, and
//!   splitting rows into one group per partition tuple ([`murmur3`] is the
//!   bucket hash; [`python_format`] the Python text forms identity uses);
//! * [`registration`] / [`payload`]: the FileRegistration and commit request
//!   JSON.
//!
//!
//! The publish path (I/O, async on tokio):
//! * [`catalog`]: the REST client (catalog, namespace, table, alter,
//!   commit/prepared, receipts, files) with typed, classified errors;
//! * [`store`]: uploads to the catalog's S3 data path (`object_store`);
//! * [`publish`]: one flush -> files per partition tuple -> one prepared
//!   commit under an idempotency key, with the retry ladder, re-prepare and
//!   orphan accounting.
//!
//! The writer's sink around [`publish::Publisher`] (HOGLAKE_* config,
//! metrics, error classes) is `millpond-writer`'s `sink::hoglake`.
//! [`layout`] declares and reconciles the partition spec and sort order.
//! This crate stays free of DuckDB.

pub mod arrow_schema;
pub mod bounds;
pub mod catalog;
pub mod error;
pub mod layout;
pub mod murmur3;
pub mod parquet_file;
pub mod partition;
pub mod partition_value;
pub mod payload;
pub mod publish;
pub mod python_format;
pub mod registration;
pub mod schema;
pub mod stats;
pub mod store;

pub use error::{Error, Result};
