//! The replay tool (`millpond-replay`): one partition's records, from Kafka
//! or a file, sent to a writer as one flush through the pipeline's stages.
//! The binary parses its arguments and prints; the rules live here.
mod position;
mod run;
mod source;

pub use position::{read_from_kafka, Position, Start};
pub use run::{run, Outcome, Request, Source};
pub use source::{lines, KafkaPartition, Owned};
