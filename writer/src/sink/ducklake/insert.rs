//! The insert path: a flush whose batches are in memory is prepared, the
//! table evolved for it and its values brought to the live types, then
//! staged as an Arrow scan and inserted by DuckDB in the flush's one lake
//! transaction.
use std::collections::HashSet;

use millpond_proto::{AckOutcome, DeadLetter};
use millpond_shared::metrics::{dead_letter_reason, error_type, skip_reason};

use super::config::DuckLakeConfig;
use super::dual_write::{self, DualWrite};
use super::lake::Lake;
use super::names::RESERVED_COLUMNS;
use super::transaction::Transaction;
use super::views::{Views, SCAN};
use super::{counts, recorded, sql, table, to_live};
use crate::sink::letters::Letters;
use crate::sink::prepare::{prepare, NameCase, Prepared};
use crate::sink::{Durable, Flush, Receipt, SinkError};

#[derive(Default)]
pub struct Inserts {
    /// uuid rewrites already logged: (column, live type).
    uuid_rewrites: HashSet<(String, String)>,
}

/// A flush shaped for the table: its rows as the table takes them, and
/// what that cost (counted once the flush is committed).
struct Shaped {
    prepared: Prepared,
    /// Rows to insert (none when every record became a dead letter).
    rows_in: usize,
    /// Columns DuckDB casts to their live type in the INSERT.
    cast: Vec<(String, String)>,
    dual: DualWrite,
    /// Records that had nothing but keys colliding with VARIANT
    /// companions: dead letters whole.
    collided: Vec<DeadLetter>,
    /// Keys stripped for colliding with VARIANT companions.
    stripped: u64,
}

impl Inserts {
    /// Writes a flush whose batches are in memory: staged as an Arrow scan
    /// and inserted by DuckDB.
    pub fn write(&mut self, lake: &mut Lake, flush: &Flush) -> Result<Durable<Receipt>, SinkError> {
        if let Some(receipt) = recorded::already_recorded(lake, flush)? {
            return Ok(receipt);
        }
        let table = lake.cfg.qualified_table();
        let shaped = self.shape(lake, flush)?;
        let letters = flush.dead_letters.and(Letters::of(
            shaped.prepared.dead_letters.iter().chain(&shaped.collided),
        ));
        let rows = insert(lake, flush, &shaped, &letters)?;
        let dual = &shaped.dual;
        lake.metrics.variant_values_coerced.inc_by(dual.coerced);
        lake.metrics
            .variant_companion_columns_dropped
            .inc_by(shaped.stripped);
        // As the original counted them: records that had nothing but
        // colliding keys (here dead letters whole, counted there too).
        lake.metrics
            .records_skipped
            .with_label_values(&[skip_reason::VARIANT_COMPANION_COLLISION])
            .inc_by(shaped.collided.len() as u64);
        lake.metrics
            .errors
            .with_label_values(&[error_type::SCHEMA])
            .inc_by(dual.omitted.len() as u64);
        counts::dead_letters(lake, &flush.id, &letters);
        lake.maybe_prune();
        Ok(Durable::new(Receipt {
            rows_written: rows,
            dead_letters_written: if lake.dead_letters.is_some() {
                letters.len() as u64
            } else {
                0
            },
            outcome: AckOutcome::Written,
            table,
            // Not looked up (transaction.rs): the commit message names the flush.
            snapshot_id: None,
            recorded: flush.ranges.clone(),
            recorded_by_another_flush: false,
        }))
    }

    /// Prepares the flush's rows and makes the table take them.
    fn shape(&mut self, lake: &mut Lake, flush: &Flush) -> Result<Shaped, SinkError> {
        let prepared = prepare(
            flush,
            &RESERVED_COLUMNS,
            lake.cfg.unsafe_names,
            NameCase::Insensitive,
        )?;
        counts::names(
            lake,
            &prepared.unsafe_names,
            prepared.rows_with_unsafe,
            &prepared.reserved_names,
        );
        let mut shaped = Shaped {
            prepared,
            rows_in: flush.rows(),
            cast: Vec::new(),
            dual: DualWrite::default(),
            collided: Vec::new(),
            stripped: 0,
        };
        if shaped.rows_in > 0 {
            strip_collisions(lake, flush, &mut shaped)?;
        }
        if shaped.rows_in > 0 {
            self.meet_table(lake, flush, &mut shaped)?;
        }
        Ok(shaped)
    }

    /// Evolves the table for the rows, then converts their values to the
    /// live types and adds the VARIANT companions.
    fn meet_table(
        &mut self,
        lake: &mut Lake,
        flush: &Flush,
        shaped: &mut Shaped,
    ) -> Result<(), SinkError> {
        let prepared = &mut shaped.prepared;
        let (conn, cfg, caches) = lake.split();
        let evo = table::ensure(conn, cfg, &mut caches.live, &prepared.schema)?;
        lake.metrics
            .schema_columns_widened
            .inc_by(evo.widened.len() as u64);
        counts::columns_added(lake, &evo);
        counts::over_limit(lake, &evo.over_limit);
        prepared.refuse(
            &evo.over_limit,
            dead_letter_reason::TOO_MANY_COLUMNS,
            &flush.ranges,
        );
        for (col, live, batch) in &evo.refused {
            if to_live::is_uuid_rewrite(live, batch) {
                // The pin and the live column disagree: the live one wins.
                lake.metrics
                    .errors
                    .with_label_values(&[error_type::SCHEMA])
                    .inc();
                if self.uuid_rewrites.insert((col.clone(), live.clone())) {
                    tracing::warn!(column = %col, live_type = %live, batch_type = %batch,
                        "uuid column pinned one way and live the other; values are rewritten to the live type (said once per column and direction)");
                }
            }
        }
        let done = to_live::to_live(lake.conn(), prepared, &evo.refused, &flush.ranges)
            .map_err(|e| lake.err_text(&e))?;
        counts::unconverted(lake, &done.failed);
        shaped.cast = done.cast_in_sql;
        if !lake.cfg.variant_columns.is_empty() {
            let (conn, cfg, caches) = lake.split();
            let live = caches.live.as_mut().expect("read by ensure");
            let dual =
                dual_write::companions(conn, cfg, live, prepared).map_err(|e| lake.err_text(&e))?;
            for (source, why) in &dual.omitted {
                tracing::warn!(column = %source, why = %why, "VARIANT companion not written for this source; its text column still lands");
            }
            shaped.dual = dual;
        }
        Ok(())
    }
}

/// Payload keys that collide with VARIANT companions: their values are
/// dead letters, and records with no other key are dead letters whole.
fn strip_collisions(lake: &Lake, flush: &Flush, shaped: &mut Shaped) -> Result<(), SinkError> {
    let live = lake
        .caches
        .columns(lake.conn(), &lake.cfg)
        .map_err(|e| lake.err(e))?;
    let strip = dual_write::collisions(&shaped.prepared.schema, &lake.cfg.variant_columns, &live);
    if strip.is_empty() {
        return Ok(());
    }
    tracing::warn!(columns = ?strip, "payload keys collide with VARIANT companions; their values are dead letters (variant_companion_collision)");
    shaped.stripped = strip.len() as u64;
    if strip.len() == shaped.prepared.schema.fields().len() {
        // Nothing else in these records: they are dead letters whole.
        shaped.collided =
            dual_write::rows_as_dead_letters(&mut shaped.prepared, &strip, &flush.ranges);
        shaped.rows_in = 0;
    } else {
        shaped.prepared.refuse(
            &strip,
            dead_letter_reason::VARIANT_COMPANION_COLLISION,
            &flush.ranges,
        );
    }
    Ok(())
}

/// Stages the shaped rows and the dead letters as views and runs the
/// flush's transaction: the rows written. When VARIANT
/// shredding fails, the flush is written again without companions.
fn insert(
    lake: &mut Lake,
    flush: &Flush,
    shaped: &Shaped,
    letters: &Letters,
) -> Result<u64, SinkError> {
    let (prepared, dual) = (&shaped.prepared, &shaped.dual);
    let mut views = Views::default();
    // A record whose keys were all dropped, or `{}`, is still a row.
    let rows = if shaped.rows_in == 0 {
        0
    } else if prepared.schema.fields().is_empty() {
        shaped.rows_in as u64
    } else {
        views.scan(lake, prepared)?
    };
    views.dead_letters(lake, &flush.id, letters)?;
    let select = views.has_scan().then(|| {
        insert_projection(
            &prepared.schema,
            &shaped.cast,
            &dual_write::scan_only(dual),
            dual_write::terms(dual),
        )
    });
    let mut committed = Transaction {
        flush,
        ddl: &[],
        rows: insert_sql(&lake.cfg, rows, select.as_deref())
            .into_iter()
            .collect(),
        dead_letters: views.dead_letters_sql(lake),
    }
    .run(lake);
    if matches!(&committed, Err(f) if !dual.companions.is_empty() && dual_write::is_shredding_failure(&f.error.message))
    {
        // The backstop: a value the scan could not reach broke shredding
        // (dual_write::is_shredding_failure). The same flush again, text
        // columns only.
        let e = committed.as_ref().err().map(|f| f.error.message.clone());
        tracing::error!(flush_id = %flush.id, error = ?e, "VARIANT shredding failed; writing this flush without its companions");
        lake.metrics.variant_write_fallback.inc();
        lake.metrics
            .errors
            .with_label_values(&[error_type::VARIANT_WRITE])
            .inc();
        views.clear(lake);
        views.scan(lake, prepared)?;
        views.dead_letters(lake, &flush.id, letters)?;
        let plain = insert_projection(
            &prepared.schema,
            &shaped.cast,
            &dual_write::scan_only(dual),
            Vec::new(),
        );
        committed = Transaction {
            flush,
            ddl: &[],
            rows: insert_sql(&lake.cfg, rows, Some(&plain))
                .into_iter()
                .collect(),
            dead_letters: views.dead_letters_sql(lake),
        }
        .run(lake);
    }
    views.close(lake);
    committed?;
    Ok(rows)
}

/// The INSERT of `rows` rows read from the scan view through `select`.
fn insert_sql(cfg: &DuckLakeConfig, rows: u64, select: Option<&str>) -> Option<String> {
    let table = cfg.sql_table();
    match select {
        Some(select) if rows > 0 => Some(format!(
            "INSERT INTO {table} BY NAME SELECT {select}, now() AS _inserted_at FROM {SCAN}"
        )),
        // Rows without a payload column: only their _inserted_at.
        None if rows > 0 => Some(format!(
            "INSERT INTO {table} (_inserted_at) SELECT now() FROM range({rows})"
        )),
        _ => None,
    }
}

/// `*`, or explicit columns with a CAST for the ones DuckDB checked
/// (every value left in them casts exactly; the rest are NULL already),
/// without the scan-only columns, plus the VARIANT companion terms.
fn insert_projection(
    schema: &arrow::datatypes::Schema,
    cast: &[(String, String)],
    scan_only: &[String],
    terms: Vec<String>,
) -> String {
    if cast.is_empty() && scan_only.is_empty() && terms.is_empty() {
        return "*".into();
    }
    schema
        .fields()
        .iter()
        .filter(|f| !scan_only.contains(f.name()))
        .map(|f| match cast.iter().find(|(c, _)| c == f.name()) {
            Some((c, live)) => format!("CAST({} AS {live}) AS {}", sql::ident(c), sql::ident(c)),
            None => sql::ident(f.name()),
        })
        .chain(terms)
        .collect::<Vec<_>>()
        .join(", ")
}
