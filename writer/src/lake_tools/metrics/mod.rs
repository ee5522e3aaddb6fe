//! `millpond-lake metrics`: lake state as `millpond_lake_*` gauges.
mod collect;
mod export;

pub use export::{once, serve};
