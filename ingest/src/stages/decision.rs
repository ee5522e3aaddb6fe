//! The stages' verdict on a converted batch, and the report of what the
//! stages and the buffer did with a consumed one.
use arrow::array::BooleanArray;
use arrow::record_batch::RecordBatch;
use millpond_shared::metrics::dead_letter_reason;

use super::coerce::Nulled;
use crate::buffer::{Buffered, Kept, ValueLetter};

/// What the record stages decided for one converted batch.
#[derive(Debug, Default)]
pub struct Decision {
    /// The batch with its columns coerced; `None`: unchanged.
    pub batch: Option<RecordBatch>,
    /// Values coercion left NULL, to be dead letters (for kept rows).
    pub nulled: Vec<Nulled>,
    /// (target type, clean) per coerced column.
    pub coerced: Vec<(&'static str, bool)>,
    /// One entry per row: kept or not. `None`: keep everything.
    pub keep: Option<BooleanArray>,
    pub filtered: Vec<(&'static str, usize)>,
    pub matched: Vec<(String, usize)>,
    /// Filters whose listed values partly cannot match their column (for
    /// `errors_total{type="filter_value_invalid"}`).
    pub invalid_values: usize,
}

/// What the stages did with a batch of records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Added {
    pub rows: usize,
    pub tombstones: usize,
    /// Dead-letter reason of each record that is not a row.
    pub dead_letters: Vec<&'static str>,
    /// Values dead-lettered out of rows (reserved keys, keys past the
    /// column limit, earlier values of a repeated key, failed coercions).
    pub dead_values: usize,
    /// Records a filter stage removed, by reason (not rows, not dead letters).
    pub filtered: Vec<(&'static str, usize)>,
    /// Rows kept by the allowlist, per matched value.
    pub matched: Vec<(String, usize)>,
    /// (target type, clean) per column coercion touched.
    pub coerced: Vec<(&'static str, bool)>,
    /// See [`Decision::invalid_values`].
    pub invalid_values: usize,
}

impl Decision {
    /// What the buffer admits: the batch, the rows kept and the values
    /// coercion left NULL as dead letters; and what is left to report.
    pub fn split(self) -> (Kept, Added) {
        let values = self
            .nulled
            .into_iter()
            .map(|n| ValueLetter {
                row: n.row,
                reason: dead_letter_reason::COLUMN_COERCION,
                column: n.column,
                live_type: n.target,
                text: n.text,
            })
            .collect();
        let kept = Kept {
            batch: self.batch,
            keep: self.keep,
            values,
        };
        let report = Added {
            filtered: self.filtered,
            matched: self.matched,
            coerced: self.coerced,
            invalid_values: self.invalid_values,
            ..Added::default()
        };
        (kept, report)
    }
}

impl Added {
    /// The report with the buffer's part filled in.
    pub fn with(self, buffered: Buffered) -> Added {
        Added {
            rows: buffered.rows,
            tombstones: buffered.tombstones,
            dead_letters: buffered.dead_letters,
            dead_values: buffered.dead_values,
            ..self
        }
    }
}
