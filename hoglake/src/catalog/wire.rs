//! The catalog's JSON objects the client sends and reads (only the fields
//! the writer uses).
use serde::{Deserialize, Serialize};

use crate::schema::{ColumnDef, ColumnType, PartitionField, SortField};

/// The Catalog object (only the fields the writer reads).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Catalog {
    pub name: String,
    pub data_path: String,
    pub head_snapshot_id: i64,
    #[serde(default)]
    pub schema_version: i64,
    /// What the server supports (`idempotent-mutation-v1`, …); empty from
    /// servers that do not say.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// `{snapshot_id, schema_version}`: a commit's answer, and a receipt's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct CommitResult {
    pub snapshot_id: i64,
    pub schema_version: i64,
}

/// One alter op (only the ones the writer issues).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AlterOp {
    AddColumn {
        column: ColumnDef,
    },
    /// Widening only (int -> long, float -> double, ...).
    PromoteColumn {
        name: String,
        to: ColumnType,
    },
    SetPartitionSpec {
        fields: Vec<PartitionField>,
    },
    SetSortOrder {
        sort_fields: Vec<SortField>,
    },
}

/// One entry of `GET …/tables/{t}/files` (the fields tests and checks read).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DataFile {
    pub data_file_id: i64,
    pub path: String,
    pub record_count: u64,
    pub file_size_bytes: u64,
    #[serde(default)]
    pub stats_state: Option<String>,
    #[serde(default)]
    pub begin_snapshot: Option<i64>,
    #[serde(default)]
    pub partition_values: Option<Vec<Option<String>>>,
}
