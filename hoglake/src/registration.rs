//! The per-file registration a commit carries (FileRegistration), built
//! from a written file, and the object URI pyhoglake names files with.

use serde::{Deserialize, Serialize};

use crate::parquet_file::ParquetFile;
use crate::schema::Column;
use crate::stats::{column_stats, ColumnStats};

/// One FileRegistration, fields in pyhoglake's order. Optional fields are
/// omitted when absent: a missing `column_stats` key means "pending" to the
/// server, so statistics are always present (possibly `[]`) when built here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRegistration {
    pub path: String,
    pub record_count: u64,
    pub file_size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column_stats: Option<Vec<ColumnStats>>,
    /// One value per live partition field; only on partitioned tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_values: Option<Vec<Option<String>>>,
}

impl FileRegistration {
    /// The registration of `file`, stored at `path`, for a table with these
    /// catalog `columns`; `partition_values` is the file's tuple, `None` on
    /// an unpartitioned table.
    pub fn new(
        path: String,
        file: &ParquetFile,
        columns: &[Column],
        partition_values: Option<Vec<Option<String>>>,
    ) -> Self {
        Self {
            path,
            record_count: file.record_count,
            file_size_bytes: file.file_size_bytes(),
            footer_size: Some(file.footer_size),
            column_stats: Some(column_stats(&file.metadata, columns)),
            partition_values,
        }
    }
}

/// `{data_path}/data/{namespace}/{table}/{idempotency_key}/{file_uuid}-{index}.parquet`,
/// the object name pyhoglake's prepared appends use (`index` = position of
/// the file in the request; the uuid is fresh per prepare).
pub fn object_uri(
    data_path: &str,
    namespace: &str,
    table: &str,
    idempotency_key: &uuid::Uuid,
    file_uuid: &uuid::Uuid,
    index: usize,
) -> String {
    format!(
        "{}/data/{namespace}/{table}/{idempotency_key}/{file_uuid}-{index}.parquet",
        data_path.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_uri_matches_the_captured_layout() {
        let key = uuid::Uuid::parse_str("fd44d7ee-72cd-48be-8b24-c14d9d8628c1").unwrap();
        let file = uuid::Uuid::parse_str("18771851-bacf-4f4c-82ba-cb3d23b57e70").unwrap();
        assert_eq!(
            object_uri("s3://lake/demo/", "analytics", "events", &key, &file, 0),
            "s3://lake/demo/data/analytics/events/fd44d7ee-72cd-48be-8b24-c14d9d8628c1/18771851-bacf-4f4c-82ba-cb3d23b57e70-0.parquet"
        );
    }
}
