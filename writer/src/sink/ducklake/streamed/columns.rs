//! How a streamed flush's batches meet the table: the new columns its
//! files bring, in the order first seen, and what each batch needs.
use std::collections::HashMap;

use super::refusal::Refusal;
use crate::sink::ducklake::spool::fits_a_file;
use crate::sink::ducklake::table::LiveColumns;
use crate::sink::ducklake::to_live;
use crate::sink::ducklake::types::{duck_type, is_widening};

/// New columns in the order first seen: (spelling, DuckDB type), and
/// their index by lowercase name.
#[derive(Default)]
pub struct NewColumns {
    pub columns: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl NewColumns {
    fn get(&self, lower: &str) -> Option<&String> {
        self.index.get(lower).map(|&i| &self.columns[i].1)
    }

    fn insert(&mut self, lower: String, name: String, duck_type: String) {
        self.index.insert(lower, self.columns.len());
        self.columns.push((name, duck_type));
    }

    fn len(&self) -> usize {
        self.columns.len()
    }

    pub fn clear(&mut self) {
        *self = NewColumns::default();
    }
}

/// How one prepared batch meets the table and the columns this flush
/// already adds.
pub struct Plan {
    /// Columns whose values must be converted: (name, type, batch type).
    pub refused: Vec<to_live::Refused>,
    /// New keys past MILLPOND_MAX_COLUMNS.
    pub over_limit: Vec<String>,
}

/// Compares a batch's columns with the table's (`live`) and those the
/// flush adds (`pending`, grown here by the batch's new keys). A column
/// the table holds with another type is converted to it, as for a flush
/// sent whole; one only a catalog change could take (a widening) is a
/// shape only the insert path writes.
pub fn plan(
    schema: &arrow::datatypes::Schema,
    live: &LiveColumns,
    pending: &mut NewColumns,
    max_columns: usize,
) -> Result<Plan, Refusal> {
    let mut out = Plan {
        refused: Vec::new(),
        over_limit: Vec::new(),
    };
    let payload = |live: &LiveColumns| live.keys().filter(|c| c.as_str() != "_inserted_at").count();
    for f in schema.fields() {
        let lower = f.name().to_ascii_lowercase();
        let batch_type = duck_type(f.data_type());
        let known = live.get(&lower).or_else(|| pending.get(&lower));
        match known {
            Some(t) if *t == batch_type => {}
            Some(t) if is_widening(t, &batch_type) => {
                return Err(Refusal::Shape(format!(
                    "column {} would widen from {t} to {batch_type}",
                    f.name()
                )))
            }
            Some(t) if to_live::needs_the_engine(t) => {
                return Err(Refusal::Shape(format!(
                    "column {} is {t} in the table, which values are cast to by DuckDB",
                    f.name()
                )))
            }
            Some(t) => out.refused.push((f.name().clone(), t.clone(), batch_type)),
            None if payload(live) + pending.len() >= max_columns => {
                out.over_limit.push(f.name().clone())
            }
            None if !fits_a_file(f.data_type()) => {
                return Err(Refusal::Shape(format!(
                    "new column {} is {batch_type}, which a Parquet file does not carry exactly as DuckDB types it",
                    f.name()
                )))
            }
            None => {
                pending.insert(lower, f.name().clone(), batch_type);
            }
        }
    }
    Ok(out)
}
