//! A flush's payload columns made ready for any sink: coordinate columns
//! read and set aside, names checked, keys that differ only by letter case
//! folded into one column. Every value that cannot be kept becomes a
//! value-level dead letter with its record's coordinates; nothing is dropped
//! silently.
//!
//! Case rule (DuckDB names are case-insensitive): the first spelling seen in
//! the flush takes the column. A later spelling's value lands in it when the
//! types agree and the row has no value there yet; otherwise it is a dead
//! letter (`duplicate_field_name`).
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::compute::kernels::zip::zip;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use millpond_proto::coordinates::{self, Coordinates};
use millpond_proto::{value_text, DeadLetter, OffsetRange};
use millpond_shared::config::is_safe_identifier;
use millpond_shared::metrics::dead_letter_reason;

use super::{Flush, SinkError};

/// The flush's rows as the sink should write them.
#[derive(Debug)]
pub struct Prepared {
    /// Payload columns only, one spelling per name.
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// Coordinates of each batch's rows, when the sender attached them.
    pub coordinates: Vec<Option<Coordinates>>,
    /// Value-level dead letters found so far.
    pub dead_letters: Vec<DeadLetter>,
    /// Names refused, for logs and `records_skipped_total`.
    pub unsafe_names: Vec<String>,
    pub reserved_names: Vec<String>,
    /// Records that lost a value to an unsafe name.
    pub rows_with_unsafe: u64,
}

enum Fate {
    Keep,
    /// Folded into the kept column at this output index.
    Fold(usize),
    Refuse(&'static str),
}

/// What happens to a key that is not `[A-Za-z_][A-Za-z0-9_]*`
/// (`$session_id`, `utm-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsafeNames {
    /// Its values go to the dead-letter table (the default).
    DeadLetter,
    /// It becomes a column under its exact name, quoted in every statement;
    /// only empty names and names with control characters are refused.
    Quote,
    /// As `DeadLetter`, and the names past the sink's own limits are
    /// unsafe too.
    Limited(NameLimits),
}

/// Names a sink refuses beyond the safe-identifier rule (hoglake: the
/// `_hog` prefix and names over 128 characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameLimits {
    /// A prefix the sink keeps for itself, compared lowercase.
    pub reserved_prefix: &'static str,
    /// The longest name, in characters.
    pub max_chars: usize,
}

impl UnsafeNames {
    fn allows(self, name: &str) -> bool {
        match self {
            UnsafeNames::DeadLetter => is_safe_identifier(name),
            UnsafeNames::Quote => {
                is_safe_identifier(name)
                    || (!name.is_empty() && !name.chars().any(char::is_control))
            }
            UnsafeNames::Limited(limits) => {
                is_safe_identifier(name)
                    && !name
                        .to_ascii_lowercase()
                        .starts_with(limits.reserved_prefix)
                    && name.chars().count() <= limits.max_chars
            }
        }
    }
}

/// Whether two keys that differ only by letter case name one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameCase {
    /// DuckDB: `Event` and `event` are one column (the first spelling wins).
    Insensitive,
    /// hoglake: they are two columns.
    Sensitive,
}

/// Prepares `flush`; `reserved` are names the sink writes itself
/// (lowercase, compared case-insensitively). A coordinate column of the
/// wrong type is a malformed request.
pub fn prepare(
    flush: &Flush,
    reserved: &[&str],
    unsafe_names: UnsafeNames,
    case: NameCase,
) -> Result<Prepared, SinkError> {
    let mut fates = Vec::new();
    let mut kept: HashMap<String, usize> = HashMap::new();
    let mut fields: Vec<Field> = Vec::new();
    let mut out = Prepared {
        schema: Arc::new(Schema::empty()),
        batches: Vec::with_capacity(flush.batches.len()),
        coordinates: Vec::with_capacity(flush.batches.len()),
        dead_letters: Vec::new(),
        unsafe_names: Vec::new(),
        reserved_names: Vec::new(),
        rows_with_unsafe: 0,
    };
    for f in flush.schema.fields() {
        let name = f.name();
        let lower = name.to_ascii_lowercase();
        let fate = if is_coordinate(name) {
            None
        } else if !unsafe_names.allows(name) {
            out.unsafe_names.push(name.clone());
            Some(Fate::Refuse(dead_letter_reason::UNSAFE_FIELD_NAME))
        } else if coordinates::is_reserved(name) || reserved.contains(&lower.as_str()) {
            out.reserved_names.push(name.clone());
            Some(Fate::Refuse(dead_letter_reason::RESERVED_FIELD_NAME))
        } else {
            let key = match case {
                NameCase::Insensitive => lower,
                NameCase::Sensitive => name.clone(),
            };
            if let Some(&i) = kept.get(&key) {
                fates.push(Some(Fate::Fold(i)));
                continue;
            }
            kept.insert(key, fields.len());
            fields.push(f.as_ref().clone());
            Some(Fate::Keep)
        };
        fates.push(fate);
    }
    out.schema = Arc::new(Schema::new(fields));
    for batch in &flush.batches {
        let coords = Coordinates::read(batch)
            .map_err(|e| SinkError::permanent(format!("flush {}: {e}", flush.id)))?;
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(out.schema.fields().len());
        let mut unsafe_rows = vec![false; batch.num_rows()];
        for (fate, (field, col)) in fates
            .iter()
            .zip(flush.schema.fields().iter().zip(batch.columns()))
        {
            let mut refuse = |reason: &'static str, rows: &mut dyn Iterator<Item = usize>| {
                for row in rows {
                    out.dead_letters.push(DeadLetter::value(
                        topic_of(&flush.ranges, coords.as_ref().map(|c| c.get(row))),
                        coords.as_ref().map(|c| c.get(row)),
                        reason,
                        field.name(),
                        "",
                        value_text(col.as_ref(), row),
                    ));
                }
            };
            match fate {
                None => {}
                Some(Fate::Keep) => cols.push(col.clone()),
                Some(Fate::Refuse(reason)) => {
                    let rows: Vec<usize> = (0..col.len()).filter(|&r| col.is_valid(r)).collect();
                    if *reason == dead_letter_reason::UNSAFE_FIELD_NAME {
                        for &r in &rows {
                            unsafe_rows[r] = true;
                        }
                    }
                    refuse(reason, &mut rows.into_iter());
                }
                Some(Fate::Fold(i)) => {
                    let target = &cols[*i];
                    if target.data_type() != col.data_type() {
                        refuse(
                            dead_letter_reason::DUPLICATE_FIELD_NAME,
                            &mut (0..col.len()).filter(|&r| col.is_valid(r)),
                        );
                        continue;
                    }
                    let take: BooleanArray = (0..col.len())
                        .map(|r| Some(col.is_valid(r) && target.is_null(r)))
                        .collect();
                    refuse(
                        dead_letter_reason::DUPLICATE_FIELD_NAME,
                        &mut (0..col.len()).filter(|&r| col.is_valid(r) && target.is_valid(r)),
                    );
                    cols[*i] = zip(&take, col, target).map_err(|e| {
                        SinkError::permanent(format!(
                            "flush {}: folding {}: {e}",
                            flush.id,
                            field.name()
                        ))
                    })?;
                }
            }
        }
        out.rows_with_unsafe += unsafe_rows.iter().filter(|&&u| u).count() as u64;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        let b = RecordBatch::try_new_with_options(out.schema.clone(), cols, &options)
            .map_err(|e| SinkError::permanent(format!("flush {}: {e}", flush.id)))?;
        out.batches.push(b);
        out.coordinates.push(coords);
    }
    Ok(out)
}

impl Prepared {
    /// Takes the columns `names` out of the batches; each of their values
    /// becomes a dead letter with `reason`.
    /// Replaces the schema with `fields` and each batch's columns with the
    /// matching entry of `columns` (row counts kept, also for batches left
    /// without a column).
    pub fn replace_columns(
        &mut self,
        fields: Vec<Field>,
        columns: Vec<Vec<ArrayRef>>,
    ) -> Result<(), String> {
        let schema = Arc::new(Schema::new(fields));
        let mut batches = Vec::with_capacity(columns.len());
        for (cols, old) in columns.into_iter().zip(&self.batches) {
            let options = RecordBatchOptions::new().with_row_count(Some(old.num_rows()));
            batches.push(
                RecordBatch::try_new_with_options(schema.clone(), cols, &options)
                    .map_err(|e| e.to_string())?,
            );
        }
        self.schema = schema;
        self.batches = batches;
        Ok(())
    }

    pub fn refuse(&mut self, names: &[String], reason: &str, ranges: &[OffsetRange]) {
        if names.is_empty() {
            return;
        }
        let keep: Vec<usize> = (0..self.schema.fields().len())
            .filter(|&i| !names.contains(self.schema.field(i).name()))
            .collect();
        for (b, batch) in self.batches.iter().enumerate() {
            let coords = self.coordinates.get(b).and_then(Option::as_ref);
            for name in names {
                let Some(col) = batch.column_by_name(name) else {
                    continue;
                };
                for row in (0..col.len()).filter(|&r| col.is_valid(r)) {
                    let at = coords.map(|c| c.get(row));
                    self.dead_letters.push(DeadLetter::value(
                        topic_of(ranges, at),
                        at,
                        reason,
                        name,
                        "",
                        value_text(col.as_ref(), row),
                    ));
                }
            }
        }
        self.schema = Arc::new(self.schema.project(&keep).expect("indices of this schema"));
        for batch in &mut self.batches {
            *batch = batch.project(&keep).expect("indices of this schema");
        }
    }
}

fn is_coordinate(name: &str) -> bool {
    [
        coordinates::PARTITION,
        coordinates::OFFSET,
        coordinates::TIMESTAMP,
        coordinates::KEY,
    ]
    .contains(&name)
}

/// The topic of the range holding a row's coordinates; the flush's first
/// topic when the row has none.
pub fn topic_of<'r>(ranges: &'r [OffsetRange], at: Option<coordinates::Coordinate<'_>>) -> &'r str {
    topic_at(ranges, at.map(|c| (c.partition, c.offset)))
}

/// The Kafka topic of the range holding `(partition, offset)`, else the
/// first range's (a flush reads one topic); a topic epoch is not part of it.
pub fn topic_at(ranges: &[OffsetRange], at: Option<(i32, i64)>) -> &str {
    let holds = |r: &&OffsetRange| {
        at.is_some_and(|(p, o)| r.partition == p && (r.first..=r.last).contains(&o))
    };
    ranges
        .iter()
        .find(holds)
        .or(ranges.first())
        .map_or("", |r| millpond_proto::kafka_topic(&r.topic))
}

#[cfg(test)]
#[path = "prepare_tests.rs"]
mod tests;
