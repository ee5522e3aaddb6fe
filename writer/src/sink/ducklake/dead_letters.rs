//! The dead-letter table: records (or values) of a flush that could not be
//! written as sent, stored beside the target table in the same transaction
//! as the flush's rows and offsets, so a crash neither loses nor repeats one.
//! Its rows are `sink::dead_letters::batch`.

/// Name of the Arrow scan view over a flush's dead letters.
pub const SCAN: &str = "millpond_dead_letters";

pub struct DeadLetterTable {
    /// Fully qualified: lake.<schema>.<name>
    pub name: String,
}

impl DeadLetterTable {
    pub fn create_sql(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} (topic VARCHAR, kafka_partition INTEGER, kafka_offset BIGINT, \
             kafka_timestamp TIMESTAMP WITH TIME ZONE, kafka_key BLOB, reason VARCHAR, column_name VARCHAR, \
             live_type VARCHAR, original BLOB, flush_id VARCHAR, _inserted_at TIMESTAMP WITH TIME ZONE)",
            self.name
        )
    }

    /// Run inside the write transaction, reading the view [`SCAN`].
    pub fn insert_sql(&self) -> String {
        format!(
            "INSERT INTO {} BY NAME SELECT *, now() AS _inserted_at FROM {SCAN}",
            self.name
        )
    }
}
