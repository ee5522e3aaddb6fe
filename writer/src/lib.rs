//! The Millpond writer: an Arrow Flight server that owns exactly one sink and
//! acknowledges a flush only once the sink made it durable.
pub mod config;
pub mod flight;
pub mod health;
#[cfg(feature = "ducklake")]
pub mod lake_tools;
pub mod run;
pub mod sink;
