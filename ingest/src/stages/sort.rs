//! The pre-write sort (MILLPOND_SORT_BY): the consolidated flush, stably
//! sorted ascending by the key columns left to right, nulls last, right
//! before it is sent. uuid keys (16-byte fixed binary) sort on their bytes,
//! which is canonical text order.
//!
//! Memory: the permutation is computed from the key columns alone, then the
//! flush is rebuilt one column at a time, each input column released as soon
//! as its sorted copy exists: the peak is the flush plus one column, not two
//! flushes.
use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt32Array};
use arrow::compute::{concat, interleave, lexsort_to_indices, SortColumn, SortOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

/// Labels of `millpond_sort_skipped_total{reason}`.
pub const FIELD_MISSING: &str = "field_missing";
pub const UNSORTABLE_TYPE: &str = "unsortable_type";

/// Rows per output batch.
const CHUNK: usize = 64 * 1024;

/// Why a flush was sent unsorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub reason: &'static str,
    /// The keys concerned (missing, or of a type with no order).
    pub keys: Vec<String>,
}

/// Types the sort orders: numbers, text, booleans, binary (uuid), times.
fn sortable(t: &DataType) -> bool {
    t.is_primitive()
        || matches!(
            t,
            DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::FixedSizeBinary(_)
        )
}

/// What [`sort`] did.
pub enum Sorted {
    Sorted(Vec<RecordBatch>),
    /// Sent as they came, and why.
    Skipped(Vec<RecordBatch>, Skipped),
}

/// Sorts `batches` (all of `schema`) by `keys`, or hands them back with the
/// reason when a key is missing or has no order. An `Err` is a kernel
/// failure after the batches were consumed (not expected for the sortable
/// types; the flush is then lost to this process and Kafka replays it).
pub fn sort(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    keys: &[String],
) -> Result<Sorted, ArrowError> {
    let mut missing = Vec::new();
    let mut unsortable = Vec::new();
    let mut idx = Vec::with_capacity(keys.len());
    for k in keys {
        match schema.index_of(k) {
            Ok(i) if sortable(schema.field(i).data_type()) => idx.push(i),
            Ok(_) => unsortable.push(k.clone()),
            Err(_) => missing.push(k.clone()),
        }
    }
    if !missing.is_empty() {
        return Ok(Sorted::Skipped(
            batches,
            Skipped {
                reason: FIELD_MISSING,
                keys: missing,
            },
        ));
    }
    if !unsortable.is_empty() {
        return Ok(Sorted::Skipped(
            batches,
            Skipped {
                reason: UNSORTABLE_TYPE,
                keys: unsortable,
            },
        ));
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if rows < 2 || rows > u32::MAX as usize {
        return Ok(Sorted::Sorted(batches));
    }
    let order = match permutation(&batches, &idx, rows) {
        Ok(o) => o,
        Err(_) => {
            return Ok(Sorted::Skipped(
                batches,
                Skipped {
                    reason: UNSORTABLE_TYPE,
                    keys: keys.to_vec(),
                },
            ))
        }
    };
    rebuild(schema, batches, &order).map(Sorted::Sorted)
}

/// (batch, row) of each output row, in sorted order. Ties keep consume
/// order: the row's position is the last key.
fn permutation(
    batches: &[RecordBatch],
    idx: &[usize],
    rows: usize,
) -> Result<Vec<(usize, usize)>, ArrowError> {
    let options = Some(SortOptions {
        descending: false,
        nulls_first: false,
    });
    let mut columns = Vec::with_capacity(idx.len() + 1);
    for &i in idx {
        let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
        columns.push(SortColumn {
            values: concat(&parts)?,
            options,
        });
    }
    columns.push(SortColumn {
        values: Arc::new(UInt32Array::from_iter_values(0..rows as u32)),
        options,
    });
    let order = lexsort_to_indices(&columns, None)?;
    drop(columns);
    let mut locate = Vec::with_capacity(rows);
    for (b, batch) in batches.iter().enumerate() {
        locate.extend((0..batch.num_rows()).map(|r| (b, r)));
    }
    Ok(order.values().iter().map(|&i| locate[i as usize]).collect())
}

/// The sorted flush, built column by column so each input column can go as
/// soon as it is copied.
fn rebuild(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    order: &[(usize, usize)],
) -> Result<Vec<RecordBatch>, ArrowError> {
    let ncols = schema.fields().len();
    // inputs[c][b]: column c of batch b.
    let mut inputs: Vec<Vec<ArrayRef>> = (0..ncols)
        .map(|c| batches.iter().map(|b| b.column(c).clone()).collect())
        .collect();
    drop(batches);
    let chunks: Vec<&[(usize, usize)]> = order.chunks(CHUNK).collect();
    let mut out: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(ncols); chunks.len()];
    for column in &mut inputs {
        let parts: Vec<&dyn Array> = column.iter().map(AsRef::as_ref).collect();
        for (k, chunk) in chunks.iter().enumerate() {
            out[k].push(interleave(&parts, chunk)?);
        }
        column.clear();
    }
    out.into_iter()
        .zip(&chunks)
        .map(|(cols, chunk)| {
            let options = RecordBatchOptions::new().with_row_count(Some(chunk.len()));
            RecordBatch::try_new_with_options(schema.clone(), cols, &options)
        })
        .collect()
}

/// Warns once per distinct (reason, keys) for the process's lifetime.
#[derive(Default)]
pub struct Warned(HashSet<(String, Vec<String>)>);

impl Warned {
    pub fn first_time(&mut self, s: &Skipped) -> bool {
        self.0.insert((s.reason.to_owned(), s.keys.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, FixedSizeBinaryArray, Int64Array, ListArray, StringArray};
    use arrow::datatypes::{Field, Int32Type, Int64Type, Schema};
    use proptest::prelude::*;

    /// One batch's (team, ts) columns.
    type Part<'a> = (Vec<Option<i64>>, Vec<Option<&'a str>>);

    fn flush(parts: Vec<Part<'_>>) -> (SchemaRef, Vec<RecordBatch>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("team", DataType::Int64, true),
            Field::new("ts", DataType::Utf8, true),
            Field::new("seq", DataType::Int64, true),
        ]));
        let mut seq = 0;
        let batches = parts
            .into_iter()
            .map(|(team, ts)| {
                let n = team.len() as i64;
                let b = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int64Array::from(team)),
                        Arc::new(StringArray::from(ts)),
                        Arc::new(Int64Array::from_iter_values(seq..seq + n)),
                    ],
                )
                .unwrap();
                seq += n;
                b
            })
            .collect();
        (schema, batches)
    }

    fn sorted(s: Sorted) -> Vec<RecordBatch> {
        match s {
            Sorted::Sorted(b) => b,
            Sorted::Skipped(_, why) => panic!("skipped: {why:?}"),
        }
    }

    fn skipped(s: Sorted) -> (Vec<RecordBatch>, Skipped) {
        match s {
            Sorted::Skipped(b, why) => (b, why),
            Sorted::Sorted(_) => panic!("sorted"),
        }
    }

    fn column(batches: &[RecordBatch], name: &str) -> Vec<Option<i64>> {
        batches
            .iter()
            .flat_map(|b| {
                b.column_by_name(name)
                    .unwrap()
                    .as_primitive::<Int64Type>()
                    .iter()
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn sorts_across_batches_by_keys_left_to_right_nulls_last_stable() {
        let (schema, batches) = flush(vec![
            (
                vec![Some(2), None, Some(1)],
                vec![Some("b"), Some("a"), Some("z")],
            ),
            (
                vec![Some(1), Some(2), Some(1)],
                vec![Some("a"), Some("b"), Some("z")],
            ),
        ]);
        let keys = vec!["team".to_owned(), "ts".to_owned()];
        let sorted = sorted(sort(&schema, batches, &keys).unwrap());
        assert_eq!(
            column(&sorted, "team"),
            [Some(1), Some(1), Some(1), Some(2), Some(2), None]
        );
        // Equal keys (1, "z") and (2, "b") keep consume order.
        assert_eq!(
            column(&sorted, "seq"),
            [Some(3), Some(2), Some(5), Some(0), Some(4), Some(1)]
        );
    }

    #[test]
    fn missing_or_unorderable_keys_skip_the_sort_and_keep_every_row() {
        let (schema, batches) = flush(vec![(vec![Some(2), Some(1)], vec![None, None])]);
        let (back, skipped) =
            skipped(sort(&schema, batches, &["team".into(), "nope".into()]).unwrap());
        assert_eq!(
            skipped,
            Skipped {
                reason: FIELD_MISSING,
                keys: vec!["nope".into()]
            }
        );
        assert_eq!(
            column(&back, "team"),
            [Some(2), Some(1)],
            "unsorted, untouched"
        );

        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
        let b = RecordBatch::try_from_iter([("l", Arc::new(list) as ArrayRef)]).unwrap();
        let (_, skipped) = self::skipped(sort(&b.schema(), vec![b], &["l".into()]).unwrap());
        assert_eq!(skipped.reason, UNSORTABLE_TYPE);
    }

    #[test]
    fn uuid_keys_sort_on_their_bytes() {
        let ids =
            FixedSizeBinaryArray::try_from_iter([[0xffu8; 16], [0x00; 16], [0x7f; 16]].into_iter())
                .unwrap();
        let b = RecordBatch::try_from_iter([("id", Arc::new(ids) as ArrayRef)]).unwrap();
        let sorted = sorted(sort(&b.schema(), vec![b], &["id".into()]).unwrap());
        let col = sorted[0].column(0).as_fixed_size_binary();
        assert_eq!(
            (col.value(0)[0], col.value(1)[0], col.value(2)[0]),
            (0x00, 0x7f, 0xff)
        );
    }

    proptest! {
        /// The output is a permutation of the input, ordered by the key,
        /// and equal keys keep their consume order.
        #[test]
        fn a_stable_sorted_permutation(parts in proptest::collection::vec(
            proptest::collection::vec(proptest::option::of(0..5i64), 0..40), 1..5)) {
            let (schema, batches) = flush(parts.iter().map(|p| (p.clone(), vec![None; p.len()])).collect());
            let n: usize = parts.iter().map(Vec::len).sum();
            let sorted = sorted(sort(&schema, batches, &["team".into()]).unwrap());
            let team = column(&sorted, "team");
            let seq = column(&sorted, "seq");
            prop_assert_eq!(seq.len(), n);
            let mut seen: Vec<i64> = seq.iter().map(|s| s.unwrap()).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..n as i64).collect::<Vec<_>>());
            for i in 1..n {
                let key = |t: Option<i64>| t.map_or(i64::MAX, |v| v); // nulls last
                prop_assert!(key(team[i - 1]) <= key(team[i]));
                if team[i - 1] == team[i] {
                    prop_assert!(seq[i - 1] < seq[i], "stable");
                }
            }
        }
    }
}
