//! Bringing batch columns whose type the table refused to the column's live
//! type, value by value and exactly, by `millpond_shared::exact`'s rules.
//! For a live type that module has no rule for (DECIMAL, DATE, UUID, ...),
//! DuckDB itself decides: a value is kept when casting it to the live type
//! and back to text gives its own text; the insert then casts it. The
//! rewrite itself (dead letters, batches) is [`crate::sink::to_live`].
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt32Array};
use arrow::datatypes::Field;
use arrow::record_batch::RecordBatch;
use duckdb::Connection;
use millpond_proto::OffsetRange;
use millpond_shared::exact::{self, Target};

use super::sql;
use super::types::duck_type;
use crate::sink::prepare::Prepared;
use crate::sink::to_live::{null_rows, Rewrite};

/// A column the table holds with another type: (name, live type, batch type).
pub type Refused = (String, String, String);

/// What converting did: columns the insert must still CAST (engine-checked
/// ones), and how many values each column lost to dead letters.
#[derive(Debug, Default)]
pub struct ToLive {
    pub cast_in_sql: Vec<(String, String)>,
    pub failed: Vec<(String, String, usize)>,
}

/// Rewrites the refused columns of `p` in place; the values that do not
/// convert are NULL and appended to `p.dead_letters`.
pub fn to_live(
    conn: &Connection,
    p: &mut Prepared,
    refused: &[Refused],
    ranges: &[OffsetRange],
) -> Result<ToLive, String> {
    let mut out = ToLive::default();
    let mut rewrite = Rewrite::new(p, ranges);
    for (name, live, _) in refused {
        let Some(idx) = rewrite.fields.iter().position(|f| f.name() == name) else {
            continue;
        };
        let target = Target::of(live);
        let lost = rewrite.column(idx, live, |source| {
            match target.and_then(|t| exact::convert(source, t)) {
                Some(c) => Ok((c.array, c.failed)),
                None => {
                    let failed = engine_check(conn, source, live)?;
                    Ok((null_rows(source, &failed)?, failed))
                }
            }
        })?;
        match target {
            Some(_)
                if rewrite
                    .first(idx)
                    .is_some_and(|c| duck_type(c.data_type()) == *live) =>
            {
                let dt = rewrite
                    .first(idx)
                    .expect("checked above")
                    .data_type()
                    .clone();
                rewrite.fields[idx] = with_extension(Field::new(name, dt, true));
            }
            _ => out.cast_in_sql.push((name.clone(), live.clone())),
        }
        if lost > 0 {
            out.failed.push((name.clone(), live.clone(), lost));
        }
    }
    rewrite.finish()?;
    Ok(out)
}

/// 16-byte binary is a uuid here: it carries the canonical `arrow.uuid`
/// extension, which DuckDB reads as UUID (bare, it would be a BLOB).
fn with_extension(f: Field) -> Field {
    if f.data_type() == &arrow::datatypes::DataType::FixedSizeBinary(16) {
        f.with_metadata(std::collections::HashMap::from([(
            "ARROW:extension:name".to_owned(),
            "arrow.uuid".to_owned(),
        )]))
    } else {
        f
    }
}

/// Whether values converted to `live` are checked and cast by DuckDB
/// (`millpond_shared::exact` has no rule for it) rather than converted here.
pub fn needs_the_engine(live: &str) -> bool {
    Target::of(live).is_none()
}

/// True for the two uuid rewrites the spec names (live uuid <- text, live
/// text <- uuid): counted and logged every time, as the original does.
pub fn is_uuid_rewrite(live: &str, batch: &str) -> bool {
    matches!((live, batch), ("UUID", "VARCHAR") | ("VARCHAR", "UUID"))
}

/// Rows (ascending) whose value DuckDB cannot cast to `live` and read back
/// as the same text.
fn engine_check(conn: &Connection, column: &dyn Array, live: &str) -> Result<Vec<usize>, String> {
    const CHECK: &str = "millpond_exact_check";
    let source = duck_type(column.data_type());
    let rows: UInt32Array = (0..column.len() as u32).collect();
    let batch = RecordBatch::try_from_iter([
        ("i", Arc::new(rows) as ArrayRef),
        ("c", arrow::array::make_array(column.to_data())),
    ])
    .map_err(|e| e.to_string())?;
    let run = || -> duckdb::Result<Vec<usize>> {
        conn.execute_batch(&format!(
            "CREATE OR REPLACE TEMP TABLE {CHECK} (i UINTEGER, c {source})"
        ))?;
        conn.appender(CHECK)?.append_record_batch(batch)?;
        let mut stmt = conn.prepare(&format!(
            "SELECT i FROM {CHECK} WHERE c IS NOT NULL AND \
             TRY_CAST(TRY_CAST(c AS {live}) AS VARCHAR) IS DISTINCT FROM CAST(c AS VARCHAR) \
             ORDER BY i"
        ))?;
        let rows = stmt.query_map([], |r| r.get::<_, u32>(0))?;
        rows.map(|r| r.map(|i| i as usize)).collect()
    };
    let result = run();
    let _ = conn.execute_batch(&format!("DROP TABLE IF EXISTS {CHECK}"));
    result.map_err(|e| format!("checking values against {}: {e}", sql::literal(live)))
}
