//! The pending flush's columns so far, first-seen, and the bytes of the
//! null padding `unify` will add at the cut to align its batches.
use std::collections::HashMap;

use arrow::datatypes::{DataType, Field};
use millpond_proto::coordinates;
use millpond_shared::metrics::dead_letter_reason;

/// Columns ingest appends to every batch (see `millpond_proto::coordinates`).
pub(crate) const COORDINATE_COLUMNS: usize = 4;

/// Bytes of a null array of `t` with `rows` rows, as `new_null_array`
/// allocates it.
fn null_bytes(t: &DataType, rows: usize) -> usize {
    let bitmap = rows.div_ceil(8);
    match t {
        DataType::Utf8 | DataType::Binary => (rows + 1) * 4 + bitmap,
        DataType::LargeUtf8 | DataType::LargeBinary => (rows + 1) * 8 + bitmap,
        DataType::Boolean => 2 * bitmap,
        t => t.primitive_width().unwrap_or(8) * rows + bitmap,
    }
}

/// Columns of the flush so far (payload and coordinates), first-seen.
#[derive(Default)]
pub struct Columns {
    types: Vec<DataType>,
    index: HashMap<String, usize>,
    /// Bytes of the null columns `unify` will add at the cut: what is sent
    /// is what counts against FLUSH_SIZE.
    padding: usize,
}

impl Columns {
    /// Decides for each column of a batch, in order, whether it joins the
    /// flush: `None` if it does, or the dead-letter reason of its values
    /// (a key in the reserved `_millpond_` namespace, or one beyond the
    /// flush's column limit, `max_columns` payload columns).
    pub fn refusals<'f>(
        &self,
        max_columns: usize,
        names: impl IntoIterator<Item = &'f String>,
    ) -> Vec<Option<&'static str>> {
        let payload_columns = self.index.len().saturating_sub(COORDINATE_COLUMNS);
        let mut room = max_columns.saturating_sub(payload_columns);
        names
            .into_iter()
            .map(|name| {
                if coordinates::is_reserved(name) {
                    Some(dead_letter_reason::RESERVED_FIELD_NAME)
                } else if self.index.contains_key(name) {
                    None
                } else if room > 0 {
                    room -= 1;
                    None
                } else {
                    Some(dead_letter_reason::TOO_MANY_COLUMNS)
                }
            })
            .collect()
    }

    /// Adds the null padding a batch of `rows` rows with `fields` will
    /// cost at the cut, `before` rows being pending already: its rows for
    /// every flush column it lacks, and every earlier row for each column
    /// it brings first. Linear in the number of columns.
    pub fn count_padding(&mut self, fields: &[Field], rows: usize, before: usize) {
        let mut present = vec![false; self.types.len()];
        for f in fields {
            match self.index.get(f.name()) {
                Some(&i) => present[i] = true,
                None => {
                    self.padding += null_bytes(f.data_type(), before);
                    self.index.insert(f.name().clone(), self.types.len());
                    self.types.push(f.data_type().clone());
                    present.push(true);
                }
            }
        }
        for (t, _) in self.types.iter().zip(&present).filter(|(_, p)| !**p) {
            self.padding += null_bytes(t, rows);
        }
    }

    /// Bytes of the padding counted so far.
    pub fn padding(&self) -> usize {
        self.padding
    }
}
