//! Pieces both Millpond processes share: typed configuration read once from
//! the environment, the Prometheus registry and metric names, the HTTP
//! endpoints for probes and scraping, logging setup, the retry ladder and
//! the deadline of a write.
pub mod config;
pub mod deadline;
pub mod decimal;
pub mod exact;
pub mod failpoint;
pub mod heap;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod process;
pub mod redact;
pub mod retry;
pub mod shutdown;
pub mod timestamp_text;
pub mod unify;
pub mod uuid_text;
