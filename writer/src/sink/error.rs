use std::time::Duration;

use millpond_shared::metrics::error_type;

/// Which destination raised an error: each names its own contention label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkId {
    DuckLake,
    Hoglake,
}

impl SinkId {
    /// Label for `millpond_errors_total{type}` on commit contention.
    pub fn contention_label(self) -> &'static str {
        match self {
            SinkId::DuckLake => error_type::DUCKLAKE_COMMIT_CONTENTION,
            SinkId::Hoglake => error_type::HOGLAKE_COMMIT_CONTENTION,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkErrorKind {
    /// Commit contention on the catalog of the named sink: worth retrying.
    /// The sink is part of the kind, so a contention error cannot be built
    /// without saying whose catalog refused.
    Contention(SinkId),
    /// Storage, catalog or network trouble: worth retrying.
    Transient,
    /// The same request can never succeed: do not retry.
    Permanent,
    /// The write's deadline is spent, or its next wait would end past it:
    /// not retried, and fatal to the writer like a spent ladder (the
    /// sender reads the flush again from Kafka).
    Deadline,
    /// Another writer holds the lease of a partition in the flush: the
    /// sender should resend later (after the lease ends or is released).
    /// Not retried inside the writer and never fatal to it.
    Leased,
    /// The flush reaches into offsets the lake already recorded under
    /// another cut: a second owner of the partition wrote them (a
    /// handover), or a hand-made replay did. Never written and never
    /// retried: the sender reads the recorded offsets again and sends only
    /// what they do not cover. Not a fault of the writer.
    Overlap,
    /// The sink took a streamed flush's batches as they arrived and cannot
    /// write them as they are (`sink::ducklake::streamed`): the sender
    /// sends the flush again whole. Not retried inside the writer.
    ResendWhole,
}

/// A failed write. Messages are scrubbed of secrets before construction.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct SinkError {
    pub kind: SinkErrorKind,
    pub message: String,
    /// Server-given floor under the next delay (Retry-After).
    pub retry_after: Option<Duration>,
}

impl SinkErrorKind {
    /// The kind in one word, for what the health endpoints say (never the
    /// message, which may quote the sink).
    pub fn name(self) -> &'static str {
        match self {
            SinkErrorKind::Contention(_) => "contention",
            SinkErrorKind::Transient => "transient",
            SinkErrorKind::Permanent => "permanent",
            SinkErrorKind::Deadline => "deadline",
            SinkErrorKind::Leased => "leased",
            SinkErrorKind::Overlap => "overlap",
            SinkErrorKind::ResendWhole => "resend_whole",
        }
    }
}

impl SinkError {
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(SinkErrorKind::Transient, message)
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(SinkErrorKind::Permanent, message)
    }

    pub fn new(kind: SinkErrorKind, message: impl Into<String>) -> Self {
        SinkError {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn is_contention(&self) -> bool {
        matches!(self.kind, SinkErrorKind::Contention(_))
    }

    /// Whether the failure says the writer cannot do its work. Another
    /// owner's lease, offsets another owner recorded and a streamed flush
    /// to be sent whole are the expected events of a handover (a rollout,
    /// a `REPLICA_COUNT` change): the sender waits or resends, and they must
    /// not make the writer unready, or a rollout would wait on the very pod
    /// whose old owner it has yet to replace.
    pub fn is_fault(&self) -> bool {
        !self.is_refusal()
    }

    /// Refused for now: another writer's lease, a streamed flush to send
    /// whole, offsets recorded under another cut. Never retried in the
    /// writer: the sender waits, resends or reads the offsets again.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.kind,
            SinkErrorKind::Leased | SinkErrorKind::Overlap | SinkErrorKind::ResendWhole
        )
    }

    pub fn is_retryable(&self) -> bool {
        !matches!(self.kind, SinkErrorKind::Permanent | SinkErrorKind::Overlap)
    }

    /// Label for `millpond_errors_total{type}`.
    pub fn error_type(&self) -> &'static str {
        match self.kind {
            SinkErrorKind::Contention(sink) => sink.contention_label(),
            SinkErrorKind::Leased => error_type::PARTITION_LEASED,
            SinkErrorKind::Overlap => error_type::OFFSETS_OVERLAP,
            SinkErrorKind::Transient
            | SinkErrorKind::Permanent
            | SinkErrorKind::ResendWhole
            | SinkErrorKind::Deadline => error_type::WRITE_RETRY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_label_is_the_raising_sinks() {
        let duck = SinkError::new(SinkErrorKind::Contention(SinkId::DuckLake), "x");
        let hog = SinkError::new(SinkErrorKind::Contention(SinkId::Hoglake), "x");
        assert_eq!(duck.error_type(), "ducklake_commit_contention");
        assert_eq!(hog.error_type(), "hoglake_commit_contention");
        assert!(duck.is_retryable() && hog.is_retryable());
        assert_eq!(
            SinkError::transient("x").error_type(),
            error_type::WRITE_RETRY
        );
    }

    #[test]
    fn only_faults_of_the_writer_count_against_its_health() {
        for kind in [
            SinkErrorKind::Leased,
            SinkErrorKind::Overlap,
            SinkErrorKind::ResendWhole,
        ] {
            assert!(!SinkError::new(kind, "x").is_fault(), "{kind:?}");
        }
        for kind in [
            SinkErrorKind::Transient,
            SinkErrorKind::Permanent,
            SinkErrorKind::Deadline,
            SinkErrorKind::Contention(SinkId::DuckLake),
        ] {
            assert!(SinkError::new(kind, "x").is_fault(), "{kind:?}");
        }
    }
}
