//! How a streamed flush's files are refused: a shape only DuckDB's insert
//! writes, or a failure; either way the sender can send the flush whole.
use crate::sink::{SinkError, SinkErrorKind};

/// Why a batch cannot go to a file.
pub enum Refusal {
    /// The flush's or table's shape: only the insert path can write it.
    Shape(String),
    Failed(SinkError),
}

impl From<SinkError> for Refusal {
    fn from(e: SinkError) -> Self {
        Refusal::Failed(e)
    }
}

pub fn resend_whole(why: &str) -> SinkError {
    SinkError::new(
        SinkErrorKind::ResendWhole,
        format!("the streamed flush cannot be written as it arrived ({why}); send it whole"),
    )
}
