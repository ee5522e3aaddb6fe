//! Column type coercion (MILLPOND_TYPED_COLUMNS): named columns pinned to
//! a target type before the filters, so a batch's type matches the
//! destination column whatever JSON inference made of its values.
//!
//! A present pinned column is always emitted as its target type, so batches
//! stay concatenable. Each value converts under the project's one set of
//! exactness rules (`millpond_shared::exact`): a value that does not is left
//! NULL and kept as a value-level dead letter (`column_coercion`), never
//! rounded. Per column per batch, either `columns_coerced_total{target_type}`
//! (every value converted) or `errors_total{type="column_coercion"}` (at
//! least one did not) moves, never both. Absent columns and columns already
//! of the target type are left as they are.
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use millpond_proto::value_text;
use millpond_shared::exact::{self, Target};

/// The pinnable types, by their configuration names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinType {
    Timestamptz,
    Bigint,
    Double,
    Boolean,
    Varchar,
    Uuid,
}

impl PinType {
    pub const NAMES: [&'static str; 6] = [
        "timestamptz",
        "bigint",
        "double",
        "boolean",
        "varchar",
        "uuid",
    ];

    pub fn parse(s: &str) -> Option<PinType> {
        Some(match s {
            "timestamptz" => PinType::Timestamptz,
            "bigint" => PinType::Bigint,
            "double" => PinType::Double,
            "boolean" => PinType::Boolean,
            "varchar" => PinType::Varchar,
            "uuid" => PinType::Uuid,
            _ => return None,
        })
    }

    /// Label of `columns_coerced_total{target_type}`.
    pub fn label(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    fn target(self) -> Target {
        match self {
            PinType::Timestamptz => Target::TimestampTz,
            PinType::Bigint => Target::Int {
                bits: 64,
                signed: true,
            },
            PinType::Double => Target::Float64,
            PinType::Boolean => Target::Boolean,
            PinType::Varchar => Target::Text,
            PinType::Uuid => Target::Uuid,
        }
    }

    /// The Arrow field a pinned column becomes. uuid carries the canonical
    /// `arrow.uuid` extension, which DuckDB reads as a UUID column.
    pub fn field(self, name: &str) -> Field {
        let dt = match self {
            PinType::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            PinType::Bigint => DataType::Int64,
            PinType::Double => DataType::Float64,
            PinType::Boolean => DataType::Boolean,
            PinType::Varchar => DataType::Utf8,
            PinType::Uuid => DataType::FixedSizeBinary(16),
        };
        let field = Field::new(name, dt, true);
        match self {
            PinType::Uuid => field.with_metadata(HashMap::from([(
                "ARROW:extension:name".to_owned(),
                "arrow.uuid".to_owned(),
            )])),
            _ => field,
        }
    }

    /// The SQL type named in a dead letter's `live_type`.
    fn sql(self) -> &'static str {
        match self {
            PinType::Timestamptz => "TIMESTAMP WITH TIME ZONE",
            PinType::Bigint => "BIGINT",
            PinType::Double => "DOUBLE",
            PinType::Boolean => "BOOLEAN",
            PinType::Varchar => "VARCHAR",
            PinType::Uuid => "UUID",
        }
    }
}

/// A value coercion left NULL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nulled {
    pub row: usize,
    pub column: String,
    pub target: &'static str,
    pub text: Vec<u8>,
}

/// What coercing one batch did.
#[derive(Debug, Default)]
pub struct Coerced {
    /// `None`: the batch is unchanged.
    pub batch: Option<RecordBatch>,
    pub nulled: Vec<Nulled>,
    /// (target type label, every value converted) per coerced column.
    pub columns: Vec<(&'static str, bool)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coercion {
    pub pins: Vec<(String, PinType)>,
}

impl Coercion {
    pub fn pin_of(&self, column: &str) -> Option<PinType> {
        self.pins.iter().find(|(c, _)| c == column).map(|(_, t)| *t)
    }

    pub fn apply(&self, batch: &RecordBatch) -> Coerced {
        let mut out = Coerced::default();
        if self.pins.is_empty() {
            return out;
        }
        let schema = batch.schema();
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        let mut changed = false;
        for (name, pin) in &self.pins {
            let Ok(i) = schema.index_of(name) else {
                continue;
            };
            let want = pin.field(name);
            if fields[i].data_type() == want.data_type() {
                continue;
            }
            let source = columns[i].clone();
            let (array, failed) = match exact::convert(source.as_ref(), pin.target()) {
                Some(c) => (c.array, c.failed),
                // A source type with no rule (a nested value, ...): nothing converts.
                None => (
                    new_null_array(want.data_type(), source.len()),
                    (0..source.len()).filter(|&r| source.is_valid(r)).collect(),
                ),
            };
            for &row in &failed {
                out.nulled.push(Nulled {
                    row,
                    column: name.clone(),
                    target: pin.sql(),
                    text: value_text(source.as_ref(), row),
                });
            }
            out.columns.push((pin.label(), failed.is_empty()));
            fields[i] = want;
            columns[i] = array;
            changed = true;
        }
        if changed {
            let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            out.batch = Some(
                RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)
                    .expect("each coerced column keeps the batch's row count"),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Float64Array, Int64Array, StringArray};
    use proptest::prelude::*;

    fn pins(p: &[(&str, PinType)]) -> Coercion {
        Coercion {
            pins: p.iter().map(|(c, t)| (c.to_string(), *t)).collect(),
        }
    }

    #[test]
    fn good_values_kept_bad_ones_nulled_and_reported() {
        let b = RecordBatch::try_from_iter([
            (
                "ts",
                Arc::new(StringArray::from(vec![
                    Some("2024-01-01 12:00:00.123"),
                    Some("later"),
                    None,
                ])) as ArrayRef,
            ),
            (
                "project_id",
                Arc::new(StringArray::from(vec![Some("42"), Some("4.5"), Some("7")])) as ArrayRef,
            ),
            (
                "uuid",
                Arc::new(StringArray::from(vec![
                    Some("{F79C3E09-677C-4BBD-A479-3F349CB785E7}"),
                    None,
                    Some("nope"),
                ])) as ArrayRef,
            ),
            ("n", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        ])
        .unwrap();
        let c = pins(&[
            ("ts", PinType::Timestamptz),
            ("project_id", PinType::Bigint),
            ("uuid", PinType::Uuid),
            ("n", PinType::Bigint),
            ("absent", PinType::Double),
        ])
        .apply(&b);
        let out = c.batch.unwrap();
        assert_eq!(out.num_rows(), 3);
        assert_eq!(
            out.column(1)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .collect::<Vec<_>>(),
            [Some(42), None, Some(7)]
        );
        assert_eq!(
            out.schema().field(2).metadata()["ARROW:extension:name"],
            "arrow.uuid"
        );
        assert_eq!(out.column(2).as_fixed_size_binary().value(0)[0], 0xf7);
        let nulled: Vec<_> = c
            .nulled
            .iter()
            .map(|n| (n.row, n.column.as_str(), n.text.as_slice()))
            .collect();
        assert_eq!(
            nulled,
            [
                (1, "ts", &b"later"[..]),
                (1, "project_id", &b"4.5"[..]),
                (2, "uuid", &b"nope"[..])
            ]
        );
        // n is already BIGINT: untouched, not counted.
        assert_eq!(
            c.columns,
            [("timestamptz", false), ("bigint", false), ("uuid", false)]
        );
    }

    #[test]
    fn a_leap_second_and_a_braced_urn_are_nulled_never_moved_or_read() {
        let b = RecordBatch::try_from_iter([
            (
                "ts",
                Arc::new(StringArray::from(vec![
                    "2024-01-01 12:00:59.5",
                    "2024-01-01 12:00:60.5",
                ])) as ArrayRef,
            ),
            (
                "id",
                Arc::new(StringArray::from(vec![
                    "urn:uuid:f79c3e09-677c-4bbd-a479-3f349cb785e7",
                    "urn:uuid:{f79c3e09-677c-4bbd-a479-3f349cb785e7}",
                ])) as ArrayRef,
            ),
        ])
        .unwrap();
        let c = pins(&[("ts", PinType::Timestamptz), ("id", PinType::Uuid)]).apply(&b);
        let out = c.batch.unwrap();
        let ts = out
            .column(0)
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        assert_eq!(ts.value(0), 1_704_110_459_500_000);
        assert!(ts.is_null(1), "12:00:60.5 never lands as 12:00:59.5");
        assert!(out.column(1).is_valid(0) && out.column(1).is_null(1));
        let nulled: Vec<_> = c
            .nulled
            .iter()
            .map(|n| (n.row, n.column.as_str(), n.text.as_slice()))
            .collect();
        assert_eq!(
            nulled,
            [
                (1, "ts", &b"2024-01-01 12:00:60.5"[..]),
                (
                    1,
                    "id",
                    &b"urn:uuid:{f79c3e09-677c-4bbd-a479-3f349cb785e7}"[..]
                ),
            ]
        );
    }

    proptest! {
        /// Whatever arrives, the row count is unchanged and a present pinned
        /// column comes out as its target type.
        #[test]
        fn row_count_kept_and_type_always_the_target(
            values in proptest::collection::vec(proptest::option::of(any::<f64>()), 0..30),
            pin in proptest::sample::select(PinType::NAMES.to_vec()),
        ) {
            let b = RecordBatch::try_from_iter([("c", Arc::new(Float64Array::from(values.clone())) as ArrayRef)]).unwrap();
            let pin = PinType::parse(pin).unwrap();
            let c = pins(&[("c", pin)]).apply(&b);
            let out = c.batch.unwrap_or(b);
            prop_assert_eq!(out.num_rows(), values.len());
            let (got, want) = (out.schema().field(0).data_type().clone(), pin.field("c").data_type().clone());
            prop_assert_eq!(got, want);
            let nulls_in = values.iter().filter(|v| v.is_none()).count();
            prop_assert_eq!(out.column(0).null_count(), nulls_in + c.nulled.len());
        }
    }
}
