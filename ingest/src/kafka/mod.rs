//! Kafka: the consumer, static partition assignment and resume points,
//! offset commits, lag sampling and librdkafka statistics.
mod assign;
mod client;
mod commit;
mod discover;
mod lag;
mod latest;
mod stats;

pub use assign::{assign, my_partitions, resume_points, Resume, ResumeError};
pub use client::{build_consumer, Consumer};
pub use commit::commit_offsets;
pub use discover::Discovery;
pub use lag::LagSampler;
pub use latest::RunToLatest;
pub use stats::StatsContext;
