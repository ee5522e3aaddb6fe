//! Bringing a flush's columns to their live column types, value by value
//! and exactly, for any sink: each sink says how one column converts (by
//! `millpond_shared::exact`'s rules, or its engine's); here every value that
//! would change is NULL in its row and a `type_mismatch` dead letter with
//! its record's coordinates, and the batches are rebuilt once.
use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::compute::nullif;
use arrow::datatypes::Field;
use millpond_proto::{value_text, DeadLetter, OffsetRange};
use millpond_shared::metrics::dead_letter_reason;

use super::prepare::{topic_of, Prepared};

/// A column's values after converting: the new array (failed rows NULL)
/// and the rows (ascending) whose value did not convert exactly.
pub type Converted = (ArrayRef, Vec<usize>);

/// The columns of a prepared flush while some are rewritten; [`Self::finish`]
/// puts them back.
pub struct Rewrite<'p> {
    p: &'p mut Prepared,
    ranges: &'p [OffsetRange],
    /// The schema's fields; a sink sets a rewritten column's new field.
    pub fields: Vec<Field>,
    /// Each batch's columns.
    columns: Vec<Vec<ArrayRef>>,
}

impl<'p> Rewrite<'p> {
    /// `ranges` give each dead letter its topic.
    pub fn new(p: &'p mut Prepared, ranges: &'p [OffsetRange]) -> Self {
        let fields = p
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let columns = p.batches.iter().map(|b| b.columns().to_vec()).collect();
        Rewrite {
            p,
            ranges,
            fields,
            columns,
        }
    }

    /// Converts column `idx` of every batch with `convert`; each value that
    /// failed becomes a dead letter naming the live type `live`. Answers how
    /// many values were lost.
    pub fn column(
        &mut self,
        idx: usize,
        live: &str,
        mut convert: impl FnMut(&dyn Array) -> Result<Converted, String>,
    ) -> Result<usize, String> {
        let name = self.fields[idx].name().clone();
        let mut lost = 0;
        for (b, cols) in self.columns.iter_mut().enumerate() {
            let source = cols[idx].clone();
            let (array, failed) = convert(source.as_ref())?;
            let coords = self.p.coordinates.get(b).and_then(Option::as_ref);
            for &row in &failed {
                let at = coords.map(|c| c.get(row));
                self.p.dead_letters.push(DeadLetter::value(
                    topic_of(self.ranges, at),
                    at,
                    dead_letter_reason::TYPE_MISMATCH,
                    &name,
                    live,
                    value_text(source.as_ref(), row),
                ));
            }
            lost += failed.len();
            cols[idx] = array;
        }
        Ok(lost)
    }

    /// Column `idx` of the first batch, as rewritten so far.
    pub fn first(&self, idx: usize) -> Option<&ArrayRef> {
        self.columns.first().map(|c| &c[idx])
    }

    /// Rebuilds the flush's schema and batches from the rewritten columns.
    pub fn finish(self) -> Result<(), String> {
        self.p.replace_columns(self.fields, self.columns)
    }
}

/// `source` with the rows `failed` (ascending) NULL.
pub fn null_rows(source: &dyn Array, failed: &[usize]) -> Result<ArrayRef, String> {
    let mask: BooleanArray = (0..source.len())
        .map(|r| Some(failed.binary_search(&r).is_ok()))
        .collect();
    nullif(source, &mask).map_err(|e| e.to_string())
}
