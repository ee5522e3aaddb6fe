//! Kafka: the consumer, static partition assignment and where each
//! partition starts, records lost to retention, offset commits, lag
//! sampling, librdkafka statistics, and the MSK IAM token for
//! SASL/OAUTHBEARER.
mod assign;
pub mod aws_credentials;
mod client;
mod commit;
mod connect;
mod context;
mod discover;
pub mod identity;
mod lag;
mod latest;
pub mod msk_iam;
mod record;
mod reread;
mod retention;
mod start;

pub use assign::{assign, assignment, my_partitions, resume_points, Resume, ResumeError};
pub use client::{build_consumer, build_reread_consumer, Consumer};
pub use commit::commit_offsets;
pub use connect::partition_count;
pub use context::KafkaContext;
pub use discover::Discovery;
pub use lag::LagSampler;
pub use latest::RunToLatest;
pub use record::Record;
pub use reread::reread;
pub use retention::Retention;
pub use start::{decide, Lost, Start};
