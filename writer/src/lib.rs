//! The Millpond writer: an Arrow Flight server that owns exactly one sink and
//! acknowledges a flush only once the sink made it durable.
pub mod config;
pub mod flight;
pub mod health;
pub mod run;
pub mod sink;

/// What `millpond-lake` (the `lake` crate) uses of the writer: the lake's
/// configuration, its session as the writer opens it, and the SQL quoting.
/// The one block through which that crate reaches the DuckLake sink's
/// modules: keep these names here when those modules move.
#[cfg(feature = "ducklake")]
pub mod lake_api {
    pub use crate::sink::dead_letters::{table_setting, COORDINATES, FLUSH_ID};
    pub use crate::sink::ducklake::catalog_indexes::{
        ensure as ensure_index, state_of as index_state, states as index_states,
        steps as index_steps, Built, State as IndexState, INDEXES, PER_COMMIT,
    };
    pub use crate::sink::ducklake::classify::contended;
    pub use crate::sink::ducklake::config::{
        Catalog, EmbeddedFormat, LakeConfig, S3Config, LAST_RECORDS_TABLE, OFFSETS_TABLE,
    };
    pub use crate::sink::ducklake::connect::{open, reattach, scrub};
    pub use crate::sink::ducklake::lake_config::{memory_limit, RootCert, SslMode};
    pub use crate::sink::ducklake::names::{is_own_table, OWN_TABLE_PREFIX};
    pub use crate::sink::ducklake::session::Session;
    pub use crate::sink::ducklake::sql::{ident, literal};

    /// The lake's bucket as the writer's streamed uploads reach it (with the
    /// session's DUCKDB_S3_* settings).
    pub fn s3_store(bucket: &str, s3: &S3Config) -> Result<object_store::aws::AmazonS3, String> {
        crate::sink::ducklake::spool::remote::store(bucket, s3)
    }
}
