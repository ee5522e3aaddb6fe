//! Publish failures as sink errors: the kind the writer acts on, the
//! message with every cause (static keys scrubbed), the Retry-After.
use millpond_hoglake::catalog::ErrorClass;
use millpond_hoglake::publish::PublishError;

use super::config::HoglakeConfig;
use crate::sink::{SinkError, SinkErrorKind, SinkId};

/// The sink kind a publish failure maps to. `Exhausted` carries the class
/// of its last error, so a spent budget ends the writer's one attempt as
/// exhausted rather than being retried again as "permanent"; a
/// spent deadline ends the write.
pub fn kind_of(e: &PublishError) -> SinkErrorKind {
    let class = match e {
        PublishError::DeadlineSpent { .. } => return SinkErrorKind::Deadline,
        PublishError::Overlap(_) => return SinkErrorKind::Overlap,
        PublishError::Exhausted { last, .. } => last.class(),
        other => other.class(),
    };
    match class {
        ErrorClass::Retry => SinkErrorKind::Transient,
        ErrorClass::RePrepare => SinkErrorKind::Contention(SinkId::Hoglake),
        ErrorClass::Permanent => SinkErrorKind::Permanent,
    }
}

/// The sink error of a publish failure.
pub fn sink_error(cfg: &HoglakeConfig, e: &PublishError) -> SinkError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    let retry_after = match e {
        PublishError::Catalog(c) => c.retry_after(),
        _ => None,
    };
    SinkError {
        kind: kind_of(e),
        message: cfg.scrub(&text),
        retry_after,
    }
}
