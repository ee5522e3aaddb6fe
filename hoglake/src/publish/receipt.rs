//! What a publish answers: how it ended and what it made durable.

/// How a flush ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// This process's commit published the rows.
    Published,
    /// The commit's response was lost; the identical re-send was answered
    /// from the server's receipt (the rows published exactly once).
    Replayed,
    /// The key already had a receipt from an earlier, different payload for
    /// the same incarnation and offsets: nothing was published by this call.
    AlreadyPublished,
    /// No rows: nothing to publish.
    Empty,
}

/// What a publish made durable.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishReceipt {
    pub outcome: Outcome,
    /// Rows this call registered (0 for `AlreadyPublished` and `Empty`).
    pub rows: u64,
    /// Data files in the committed payload.
    pub files: usize,
    /// Rows of each data file, in payload order.
    pub file_rows: Vec<u64>,
    /// Dead letters registered in the dead-letter table by this call.
    pub dead_letters: u64,
    pub snapshot_id: Option<i64>,
    pub schema_version: Option<i64>,
    pub idempotency_key: Option<uuid::Uuid>,
    /// The incarnation the rows went to.
    pub table_uuid: Option<String>,
    /// Attempts used (1 = first try).
    pub attempts: u32,
    /// URIs of the committed files (data files first).
    pub paths: Vec<String>,
}
