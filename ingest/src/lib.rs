//! The Millpond ingest process: Kafka in, Arrow Flight out to the writer,
//! offsets committed only after the writer's durable acknowledgement.
pub mod buffer;
pub mod config;
pub mod convert;
pub mod delivery;
pub mod epoch;
pub mod flight;
pub mod freshness;
pub mod health;
pub mod kafka;
pub mod pipeline;
pub mod replay;
pub mod run;
pub mod sample;
pub mod stages;
pub mod writer_metrics;
