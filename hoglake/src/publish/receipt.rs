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
    /// The partition fence's offsets tables end at exactly this flush's
    /// ranges (a resend after its ack was lost, or another owner's flush
    /// of the same records): nothing was published by this call.
    AlreadyRecorded,
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
    /// `AlreadyRecorded` by a flush with another id.
    pub recorded_by_another_flush: bool,
}

impl PublishReceipt {
    /// A receipt of nothing published.
    pub fn nothing(outcome: Outcome) -> Self {
        PublishReceipt {
            outcome,
            rows: 0,
            files: 0,
            file_rows: Vec::new(),
            dead_letters: 0,
            snapshot_id: None,
            schema_version: None,
            idempotency_key: None,
            table_uuid: None,
            attempts: 0,
            paths: Vec::new(),
            recorded_by_another_flush: false,
        }
    }
}
