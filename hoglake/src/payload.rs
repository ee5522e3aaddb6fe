//! The commit request body (`POST …/commit/prepared` and friends), in the
//! key order pyhoglake sends. A prepared payload is persisted and replayed
//! unchanged, so serialising it must be deterministic: it is, field order is
//! fixed by these structs.

use serde::{Deserialize, Serialize};

use crate::registration::FileRegistration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_snapshot: Option<i64>,
    pub appends: Vec<TableAppend>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableAppend {
    pub namespace: String,
    pub table: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_table_uuid: Option<String>,
    pub files: Vec<FileRegistration>,
}
