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
    /// As `DeadLetter`, and the names hoglake refuses are unsafe too: the
    /// `_hog` prefix (any case) and names over 128 characters.
    Hoglake,
}

impl UnsafeNames {
    fn allows(self, name: &str) -> bool {
        use crate::sink::hoglake::{MAX_NAME_CHARS, RESERVED_PREFIX};
        match self {
            UnsafeNames::DeadLetter => is_safe_identifier(name),
            UnsafeNames::Quote => {
                is_safe_identifier(name)
                    || (!name.is_empty() && !name.chars().any(char::is_control))
            }
            UnsafeNames::Hoglake => {
                is_safe_identifier(name)
                    && !name.to_ascii_lowercase().starts_with(RESERVED_PREFIX)
                    && name.chars().count() <= MAX_NAME_CHARS
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
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Int64Type};
    use millpond_proto::coordinates::Coordinate;
    use millpond_proto::FlushTrigger;

    fn flush(cols: Vec<(&str, ArrayRef)>) -> Flush {
        let rows = cols[0].1.len();
        let at: Vec<Coordinate<'_>> = (0..rows)
            .map(|i| Coordinate {
                partition: 2,
                offset: 100 + i as i64,
                timestamp_ms: Some(7),
                key: Some(b"k"),
            })
            .collect();
        let mut all: Vec<(Field, ArrayRef)> = cols
            .into_iter()
            .map(|(n, a)| (Field::new(n, a.data_type().clone(), true), a))
            .collect();
        all.extend(coordinates::columns(at.into_iter()));
        let (fields, arrays): (Vec<_>, Vec<_>) = all.into_iter().unzip();
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
        Flush {
            id: "f".into(),
            trigger: FlushTrigger::Size,
            ranges: vec![OffsetRange::new("t", 2, 100, 199)],
            schema,
            batches: vec![batch],
            dead_letters: vec![],
            streamed: None,
        }
    }

    fn ints(v: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(v))
    }

    #[test]
    fn refused_names_become_dead_letters_with_coordinates() {
        let f = flush(vec![
            ("ok", ints(vec![Some(1), Some(2)])),
            (
                "$set",
                Arc::new(StringArray::from(vec![Some("{\"a\":1}"), None])),
            ),
            ("_inserted_at", ints(vec![None, Some(5)])),
            ("_millpond_x", ints(vec![Some(9), None])),
        ]);
        let p = prepare(
            &f,
            &["_inserted_at"],
            UnsafeNames::DeadLetter,
            NameCase::Insensitive,
        )
        .unwrap();
        assert_eq!(
            p.schema.fields().len(),
            1,
            "coordinates and refused names are not columns"
        );
        assert_eq!(p.unsafe_names, ["$set"]);
        assert_eq!(p.reserved_names, ["_inserted_at", "_millpond_x"]);
        assert_eq!(p.rows_with_unsafe, 1);
        let dl: Vec<_> = p
            .dead_letters
            .iter()
            .map(|l| {
                (
                    l.reason.as_str(),
                    l.column.as_str(),
                    l.offset,
                    l.original.as_slice(),
                    l.topic.as_str(),
                )
            })
            .collect();
        assert_eq!(
            dl,
            [
                ("unsafe_field_name", "$set", 100, &b"{\"a\":1}"[..], "t"),
                ("reserved_field_name", "_inserted_at", 101, &b"5"[..], "t"),
                ("reserved_field_name", "_millpond_x", 100, &b"9"[..], "t"),
            ]
        );
        assert!(p
            .dead_letters
            .iter()
            .all(|l| l.key.as_deref() == Some(&b"k"[..])
                && l.partition == 2
                && l.timestamp_ms == Some(7)));
    }

    #[test]
    fn quoted_mode_keeps_unsafe_names_as_columns() {
        let f = flush(vec![
            ("$set", ints(vec![Some(1), None])),
            ("utm-source", ints(vec![None, Some(2)])),
            ("", ints(vec![Some(3), None])),
            ("a\tb", ints(vec![Some(4), None])),
        ]);
        let p = prepare(&f, &[], UnsafeNames::Quote, NameCase::Insensitive).unwrap();
        let names: Vec<_> = p
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["$set", "utm-source"]);
        assert_eq!(p.unsafe_names, ["", "a\tb"]);
        assert_eq!(p.dead_letters.len(), 2);
    }

    #[test]
    fn case_duplicates_fold_when_they_can_and_dead_letter_otherwise() {
        let f = flush(vec![
            ("Foo", ints(vec![Some(1), None, Some(3)])),
            ("foo", ints(vec![None, Some(2), Some(30)])),
            (
                "FOO",
                Arc::new(StringArray::from(vec![Some("x"), None, None])),
            ),
        ]);
        let p = prepare(&f, &[], UnsafeNames::DeadLetter, NameCase::Insensitive).unwrap();
        assert_eq!(p.schema.fields().len(), 1);
        assert_eq!(p.schema.field(0).name(), "Foo");
        assert_eq!(p.schema.field(0).data_type(), &DataType::Int64);
        let col = p.batches[0].column(0).as_primitive::<Int64Type>();
        assert_eq!(col.iter().collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
        let dl: Vec<_> = p
            .dead_letters
            .iter()
            .map(|l| (l.column.as_str(), l.offset, l.original.as_slice()))
            .collect();
        assert_eq!(dl, [("foo", 102, &b"30"[..]), ("FOO", 100, &b"x"[..])]);
        assert!(p
            .dead_letters
            .iter()
            .all(|l| l.reason == "duplicate_field_name"));
    }

    #[test]
    fn a_coordinate_of_the_wrong_type_is_refused() {
        let mut f = flush(vec![("a", ints(vec![Some(1)]))]);
        let bad = RecordBatch::try_from_iter([
            ("a", ints(vec![Some(1)])),
            (
                coordinates::OFFSET,
                Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
            ),
        ])
        .unwrap();
        f.schema = bad.schema();
        f.batches = vec![bad];
        let e = prepare(&f, &[], UnsafeNames::DeadLetter, NameCase::Insensitive).unwrap_err();
        assert!(e.message.contains(coordinates::OFFSET), "{}", e.message);
    }
}
