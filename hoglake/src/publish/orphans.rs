//! Orphans: files uploaded and never registered, counted per reason with
//! their URIs logged.
use std::collections::BTreeMap;

/// The reasons an upload is left orphaned: the original's names, then ours
/// (`commit_conflict`, `table_dropped`, `retries_exhausted`). A refusal with
/// another code counts under that code.
pub const ORPHAN_REASONS: [&str; 9] = [
    "prepare_failed",
    "commit_refused",
    "already_published",
    "table_recreated",
    "read_snapshot_expired",
    "ddl_since_read_snapshot",
    "commit_conflict",
    "table_dropped",
    "retries_exhausted",
];

/// Orphaned files (uploaded, never registered) per reason. Exact where a
/// payload existed; an upload that failed half-way counts only the objects
/// whose PutObject succeeded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanCounts {
    by_reason: BTreeMap<String, u64>,
}

impl OrphanCounts {
    pub fn get(&self, reason: &str) -> u64 {
        self.by_reason.get(reason).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.by_reason.values().sum()
    }

    pub fn by_reason(&self) -> &BTreeMap<String, u64> {
        &self.by_reason
    }

    pub(super) fn add(&mut self, reason: &str, uris: &[String]) {
        if uris.is_empty() {
            return;
        }
        *self.by_reason.entry(reason.to_string()).or_default() += uris.len() as u64;
        const SHOWN: usize = 10;
        let shown = uris
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        let more = uris.len().saturating_sub(SHOWN);
        tracing::warn!(
            reason,
            count = uris.len(),
            "hoglake: {} uploaded file(s) will never be registered and are unreclaimed storage; delete these URIs (never their key prefix): {shown}{}",
            uris.len(),
            if more > 0 { format!(" (and {more} more)") } else { String::new() }
        );
    }
}
