//! `millpond-lake metrics`: lake state as `millpond_lake_*` gauges.
mod catalog_state;
mod collect;
mod export;
pub(crate) mod queries;
mod query_gauges;
mod shape;

pub(crate) use export::push;
pub use export::{once, serve};
