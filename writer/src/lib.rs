//! The Millpond writer: an Arrow Flight server that owns exactly one sink and
//! acknowledges a flush only once the sink made it durable.
pub mod config;
pub mod flight;
pub mod health;
pub mod retry;
pub mod run;
pub mod sink;
