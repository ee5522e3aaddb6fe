//! The allowlist (keep) and denylist (drop) filters, composed as
//! keep AND NOT drop, applied to each converted batch before it enters the
//! buffer. Filtered records are a deliberate choice: counted on
//! `records_skipped_total{reason}`, never dead letters.
//!
//! Each record is kept or dropped by its own value alone, however its batch
//! was cut: a cell compares as the value its record sent, whatever type the
//! converter gave the batch's column (`compare`). Numbers compare by exact
//! decimal value (`1.0` and `1e0` are the listed `1`, `1.5` is no integer),
//! text that is a JSON number literal as that number (`"1"` is `1`, `"02"`
//! is not), booleans as `true` / `false`, other text by spelling, a
//! uuid-pinned column by the bytes of the listed uuids.
//!
//! The allowlist fails closed: a record without the field (missing or
//! null), or whose value no list can compare with (a column pinned to a
//! timestamp), is `filter_field_missing`; a value not listed is
//! `filter_excluded`; on a uuid column when no listed value is a uuid,
//! `filter_value_invalid`. The denylist fails open: such records are kept
//! (a warning says so once per field and column type); a listed value is
//! `filter_dropped`.
mod compare;
#[cfg(test)]
mod per_record;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use arrow::array::{Array, BooleanArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::Decision;
use compare::{Cell, Index};

pub const FIELD_MISSING: &str = "filter_field_missing";
pub const EXCLUDED: &str = "filter_excluded";
pub const DROPPED: &str = "filter_dropped";
pub const VALUE_INVALID: &str = "filter_value_invalid";

/// A configured value list: all integers, or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Values {
    Int(Vec<i64>),
    Text(Vec<String>),
}

impl Values {
    /// Integers when every token parses as one, text otherwise; `None` for
    /// an empty token.
    pub fn parse(raw: &str) -> Option<Values> {
        let tokens: Vec<&str> = raw.split(',').map(str::trim).collect();
        if tokens.iter().any(|t| t.is_empty()) {
            return None;
        }
        let ints: Option<Vec<i64>> = tokens.iter().map(|t| t.parse().ok()).collect();
        Some(match ints {
            Some(i) => Values::Int(i),
            None => Values::Text(tokens.into_iter().map(str::to_owned).collect()),
        })
    }
}

/// The allowlist the keep filter reads on every batch: the static list, or
/// in authoritative mode what the poller last published.
#[derive(Debug, Clone)]
pub struct LiveValues(Arc<RwLock<Values>>);

impl LiveValues {
    pub fn new(initial: Values) -> Self {
        LiveValues(Arc::new(RwLock::new(initial)))
    }

    pub fn get(&self) -> Values {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The poller's authoritative set replaces the list.
    pub(in crate::stages) fn publish(&self, values: Values) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = values;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub field: String,
    pub values: Values,
}

impl Filter {
    /// How each row of `batch` compares with the list.
    fn cells(&self, batch: &RecordBatch) -> (Vec<Cell>, Index) {
        let index = Index::new(&self.values);
        let col = batch.column_by_name(&self.field).map(|c| c.as_ref());
        (index.cells(col, batch.num_rows()), index)
    }

    fn label(&self, i: usize) -> String {
        match &self.values {
            Values::Int(l) => l[i].to_string(),
            Values::Text(l) => l[i].clone(),
        }
    }
}

#[derive(Debug, Default)]
pub struct Filters {
    pub keep: Option<Filter>,
    pub drop: Option<Filter>,
    /// Denylist failures already warned about: (field, column type).
    warned: HashSet<(String, String)>,
    /// The allowlist's values when a dynamic source governs them.
    live: Option<LiveValues>,
}

impl Filters {
    pub fn new(keep: Option<Filter>, drop: Option<Filter>) -> Filters {
        Filters {
            keep,
            drop,
            warned: HashSet::new(),
            live: None,
        }
    }

    /// The allowlist takes its values from `live` (authoritative mode).
    pub fn with_live_values(mut self, live: LiveValues) -> Self {
        self.live = Some(live);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.keep.is_none() && self.drop.is_none()
    }

    /// Which rows of `batch` go on, and why the others do not.
    pub fn decide(&mut self, batch: &RecordBatch) -> Decision {
        if self.is_empty() {
            return Decision::default();
        }
        let n = batch.num_rows();
        let mut keep = vec![true; n];
        let mut reasons: HashMap<&'static str, usize> = HashMap::new();
        let mut matched_at: Vec<Option<usize>> = vec![None; n];
        let live_keep = match (&self.keep, &self.live) {
            (Some(f), Some(live)) => Some(Filter {
                field: f.field.clone(),
                values: live.get(),
            }),
            (keep, _) => keep.clone(),
        };
        let mut invalid = 0;
        if let Some(f) = &live_keep {
            self.count_invalid_uuids(batch, f, &mut invalid);
            let (cells, index) = f.cells(batch);
            // No listed value can match a uuid column: its values are
            // refused under their own reason.
            let no_uuid = is_uuid(batch, &f.field) && index.has_no_uuid();
            for (r, c) in cells.into_iter().enumerate() {
                let reason = match c {
                    Cell::In(i) => {
                        matched_at[r] = Some(i);
                        continue;
                    }
                    Cell::Null | Cell::Incomparable => FIELD_MISSING,
                    Cell::Out if no_uuid => VALUE_INVALID,
                    Cell::Out => EXCLUDED,
                };
                keep[r] = false;
                *reasons.entry(reason).or_default() += 1;
            }
        }
        if let Some(f) = self.drop.clone() {
            self.count_invalid_uuids(batch, &f, &mut invalid);
            let (cells, _) = f.cells(batch);
            let col = batch.column_by_name(&f.field);
            if col.is_none() || cells.contains(&Cell::Incomparable) {
                let ty = col.map_or_else(|| "missing".to_owned(), |c| c.data_type().to_string());
                if self.warned.insert((f.field.clone(), ty.clone())) {
                    tracing::warn!(field = %f.field, column = %ty,
                        "denylist cannot evaluate this column; keeping its records (said once per field and type)");
                }
            }
            for (r, c) in cells.into_iter().enumerate() {
                if keep[r] && matches!(c, Cell::In(_)) {
                    keep[r] = false;
                    *reasons.entry(DROPPED).or_default() += 1;
                }
            }
        }
        let mut matched: HashMap<usize, usize> = HashMap::new();
        if let Some(f) = &live_keep {
            for (r, m) in matched_at.iter().enumerate() {
                if let (true, Some(i)) = (keep[r], m) {
                    *matched.entry(*i).or_default() += 1;
                }
            }
            let mut matched: Vec<(String, usize)> =
                matched.into_iter().map(|(i, c)| (f.label(i), c)).collect();
            matched.sort();
            return Decision {
                keep: Some(BooleanArray::from(keep)),
                filtered: sorted(reasons),
                matched,
                invalid_values: invalid,
                ..Decision::default()
            };
        }
        Decision {
            keep: Some(BooleanArray::from(keep)),
            filtered: sorted(reasons),
            invalid_values: invalid,
            ..Decision::default()
        }
    }
}

impl Filters {
    /// On a uuid column, values that are not uuids (served by a dynamic
    /// source; static ones are refused at startup) cannot match: counted
    /// once per batch in `invalid` and warned about once per (field, set
    /// size, first offender).
    fn count_invalid_uuids(&mut self, batch: &RecordBatch, f: &Filter, invalid: &mut usize) {
        if !is_uuid(batch, &f.field) {
            return;
        }
        let (bad, total): (Vec<String>, usize) = match &f.values {
            Values::Int(l) => (l.iter().map(i64::to_string).collect(), l.len()),
            Values::Text(l) => (
                l.iter()
                    .filter(|v| millpond_shared::uuid_text::parse(v).is_none())
                    .cloned()
                    .collect(),
                l.len(),
            ),
        };
        if bad.is_empty() {
            return;
        }
        *invalid += 1;
        let key = (format!("{}#{total}", f.field), bad[0].clone());
        if self.warned.insert(key) {
            tracing::warn!(field = %f.field, set_size = total, invalid = bad.len(), first = %bad[0],
                "allowlist values that are not uuids cannot match a uuid column; left out of the comparison");
        }
    }
}

fn is_uuid(batch: &RecordBatch, field: &str) -> bool {
    batch
        .column_by_name(field)
        .is_some_and(|c| c.data_type() == &DataType::FixedSizeBinary(16))
}

fn sorted(m: HashMap<&'static str, usize>) -> Vec<(&'static str, usize)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort();
    v
}
