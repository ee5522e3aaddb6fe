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
    /// Delete groups (`…/commit/mutations/prepared` only). Left out of the
    /// body when empty, so `/commit/prepared` bodies stay as pyhoglake's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deletes: Vec<TableDeletes>,
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

/// One delete group. The writer sends only empty ones: a group with no
/// files deletes nothing, but binds its table to the request's
/// `read_snapshot`, so the commit is refused (409 `commit_conflict`) when
/// anything was appended to or deleted from that table since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableDeletes {
    pub namespace: String,
    pub table: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_table_uuid: Option<String>,
    pub files: Vec<DeletionVector>,
}

/// A deletion-vector registration (never sent by the writer; typed so a
/// group reads back as the server defines it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletionVector {
    pub data_file_id: i64,
    pub path: String,
    pub delete_count: u64,
    pub file_size_bytes: u64,
}
