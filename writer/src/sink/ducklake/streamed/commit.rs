//! A spooled flush at its trailer: its files closed and published, the
//! columns they bring planned against the table as the lake has it now,
//! and the files registered with `ducklake_add_data_files` in the flush's
//! one lake transaction.
use arrow::datatypes::{Field, Schema};
use millpond_proto::AckOutcome;
use millpond_shared::failpoint::{self, Failpoint};

use std::path::Path;

use super::letter_file::{LetterFile, INLINED_ROWS};
use super::pause::FilesPause;
use super::refusal::resend_whole;
use super::spooling::file_codec;
use super::stream::Streamed;
use crate::sink::ducklake::classify::FILE_REFUSED;
use crate::sink::ducklake::lake::Lake;
use crate::sink::ducklake::sql::literal;
use crate::sink::ducklake::table::{self, Evolution};
use crate::sink::ducklake::transaction::{Failed, Transaction};
use crate::sink::ducklake::views::Views;
use crate::sink::ducklake::{connect, counts, recorded, spool};
use crate::sink::letters::Letters;
use crate::sink::{Durable, Flush, Receipt, SinkError};

/// Columns a flush's files bring, added in its write transaction.
struct ColumnChanges {
    ddl: Vec<String>,
    schema: Schema,
    evo: Evolution,
}

/// Registers a spooled flush's files in its transaction.
pub fn commit_files(
    lake: &mut Lake,
    pause: &mut FilesPause,
    flush: &Flush,
    st: &mut Streamed,
) -> Result<Durable<Receipt>, SinkError> {
    let spool = st.spool.as_mut().expect("spooled");
    spool.close().map_err(|e| resend_whole(&e))?;
    if let Some(receipt) = recorded::already_recorded(lake, flush)? {
        let letter_file = st.letter_file.as_mut();
        if st.maybe_in_lake {
            spool.release();
            if let Some(f) = letter_file {
                f.release();
            }
        } else {
            spool.remove();
            if let Some(f) = letter_file {
                f.remove();
            }
        }
        return Ok(receipt);
    }
    // The flush is planned against the table as the lake has it now.
    lake.open_table()?;
    let (table_columns, unchanged) = lake_columns(lake, pause)?;
    let columns = pending_columns(lake, st)?;
    let spool = st.spool.as_mut().expect("spooled");
    let joined = spool.merge_files(st.maybe_in_lake);
    if joined > 0 {
        tracing::debug!(flush_id = %flush.id, files = joined, "joined the flush's files into one");
    }
    let filled = spool
        .fill_missing_columns(&table_columns, st.maybe_in_lake)
        .map_err(|e| resend_whole(&e))?;
    if !filled.is_empty() {
        tracing::info!(flush_id = %flush.id, columns = ?filled, files = spool.files.len(),
            "wrote the flush's files lacking a column again with it, all NULL: the lake would record these columns as never NULL");
    }
    let ddl: Vec<String> = unchanged
        .into_iter()
        .chain(columns.ddl.iter().cloned())
        .collect();
    failpoint::pause(Failpoint::PauseBeforePublish);
    let spool = st.spool.as_mut().expect("spooled");
    // A failed fsync sends the flush again whole (`Spool::sync`).
    spool.sync().map_err(|e| resend_whole(&e))?;
    // For a lake on S3, the files are uploaded here.
    let files = spool
        .publish(st.maybe_in_lake)
        .map_err(|e| SinkError::transient(connect::scrub(&lake.cfg.lake, &e)))?;
    let mut found = st.dead_letters.clone();
    found.fill_topics(&flush.ranges);
    let letters = flush.dead_letters.and(found);
    let mut views = Views::default();
    let dead_letters = match letters_in_a_file(lake, flush, st, &letters)? {
        Some(sql) => Some(sql),
        None => {
            views.dead_letters(lake, &flush.id, &letters)?;
            views.dead_letters_sql(lake)
        }
    };
    let table = literal(&lake.cfg.table);
    let schema = literal(&lake.cfg.schema);
    // Every file in one call: DuckLake reads each footer either way, but
    // one call per file cost ~10 ms each against ~6.5 in a list (15
    // files of the anchor run, measured).
    let files: Vec<String> = files.iter().map(|f| literal(f)).collect();
    let calls: Vec<String> = (!files.is_empty())
        .then(|| format!(
            "CALL ducklake_add_data_files('lake', {table}, [{}], schema => {schema}, allow_missing => true)",
            files.join(", ")
        ))
        .into_iter()
        .collect();
    let committed = Transaction {
        flush,
        ddl: &ddl,
        rows: calls,
        dead_letters,
    }
    .run(lake);
    // COMMIT was issued: the files may be in the lake.
    st.maybe_in_lake |= committed
        .as_ref()
        .map_or_else(Failed::commit_sent, |_| true);
    views.close(lake);
    committed.map_err(|failed| {
        // The lake refused a file (a type another writer changed since,
        // a table partitioned meanwhile): the insert path can write it.
        if failed.rows_refused() && failed.error.message.contains(FILE_REFUSED) {
            // The table changed under the files: read it again.
            lake.caches.live = None;
            pause.turn_files_off(&failed.error.message);
            resend_whole(&failed.error.message)
        } else {
            failed.error
        }
    })?;
    let spool = st.spool.as_mut().expect("spooled");
    spool.release();
    if let Some(file) = st.letter_file.as_mut() {
        file.release();
    }
    if columns.evo.created {
        tracing::info!(table = %lake.cfg.qualified_table(), columns = columns.schema.fields().len() + 1, "table created");
        // Read its columns as the lake has them at the next flush.
        lake.caches.live = None;
    } else if let Some(live) = lake.caches.live.as_mut() {
        table::assume(live, &columns.schema, &columns.evo);
    }
    counts::columns_added(lake, &columns.evo);
    counts::names(
        lake,
        &st.unsafe_names,
        st.rows_with_unsafe,
        &st.reserved_names,
    );
    counts::over_limit(lake, &st.over_limit);
    counts::unconverted(lake, &st.unconverted);
    counts::dead_letters(lake, &flush.id, &letters);
    lake.maybe_prune();
    Ok(Durable::new(Receipt {
        rows_written: spool.rows,
        dead_letters_written: if lake.dead_letters.is_some() {
            letters.len() as u64
        } else {
            0
        },
        outcome: AckOutcome::Written,
        table: lake.cfg.qualified_table(),
        // Not looked up (transaction.rs): the commit message names the flush.
        snapshot_id: None,
        recorded: flush.ranges.clone(),
        recorded_by_another_flush: false,
    }))
}

/// The columns the files hold and the table lacks: the DDL that adds
/// them inside the write transaction (where `ducklake_add_data_files`
/// already sees them, and a rollback undoes both), and what it adds.
/// A table not created yet is created from these columns, in that
/// transaction too unless it needs a commit of its own
/// (`table::create_in_write`). If the table has one of them with another type, or
/// reached MILLPOND_MAX_COLUMNS, the files cannot be registered.
fn pending_columns(lake: &mut Lake, st: &Streamed) -> Result<ColumnChanges, SinkError> {
    let fields: Vec<Field> = st
        .pending
        .columns
        .iter()
        .map(|(name, t)| {
            let dt = spool::arrow_type(t).expect("pending types fit a file");
            Field::new(name, dt, true)
        })
        .collect();
    let schema = Schema::new(fields);
    // After a failed attempt the columns are read again here.
    lake.open_table()?;
    if let Some(live) = lake.caches.live.as_ref().filter(|l| !l.is_empty()) {
        let (ddl, evo) = table::plan(live, &lake.cfg, &schema);
        files_can_take(&evo)?;
        if let Some(col) = evo.widened.first() {
            return Err(resend_whole(&format!(
                "column {col} is narrower in the table than in the files: widening it is DuckDB's insert's work"
            )));
        }
        return Ok(ColumnChanges { ddl, schema, evo });
    }
    if let Some(create) = table::create_in_write(&lake.cfg, &schema) {
        let evo = Evolution {
            created: true,
            ..Default::default()
        };
        return Ok(ColumnChanges {
            ddl: vec![create],
            schema,
            evo,
        });
    }
    let (conn, cfg, caches) = lake.split();
    let evo = table::ensure(conn, cfg, &mut caches.live, &schema)?;
    counts::columns_added(lake, &evo);
    files_can_take(&evo)?;
    Ok(ColumnChanges {
        ddl: Vec::new(),
        schema: Schema::empty(),
        evo: Evolution::default(),
    })
}

/// The table's columns as the lake has them now, not as the session
/// last read them, as the fields a file carries (`spool::fill` adds
/// every one a file lacks), and the statement that fails the write
/// transaction if their number changed by then. The session keeps them
/// for planning this flush and the next one's files. A column no file
/// can carry (another writer's) sends the flush to the insert path.
fn lake_columns(
    lake: &mut Lake,
    pause: &mut FilesPause,
) -> Result<(Vec<Field>, Option<String>), SinkError> {
    let cols = table::read_columns(lake.conn(), &lake.cfg).map_err(|e| lake.err(e))?;
    let unchanged = table::columns_unchanged_sql(&lake.cfg, &cols);
    let fields = spool::file_fields(&cols);
    let uncarried = spool::uncarried(&cols);
    // Kept even then: the next flush's files are refused at their start.
    lake.caches.live = Some(cols);
    if let Some(why) = uncarried {
        pause.turn_files_off(&why);
        return Err(resend_whole(&why));
    }
    Ok((fields, unchanged))
}

/// Refuses the files when the table has one of their columns with another
/// type, or has no room left for one of them.
fn files_can_take(evo: &Evolution) -> Result<(), SinkError> {
    if let Some((col, live, _)) = evo.refused.first() {
        return Err(resend_whole(&format!(
            "column {col} became {live} in the table meanwhile"
        )));
    }
    if let Some(col) = evo.over_limit.first() {
        return Err(resend_whole(&format!(
            "the table reached MILLPOND_MAX_COLUMNS before {col} could be added"
        )));
    }
    Ok(())
}

/// The statement that registers the flush's dead letters as a file of the
/// dead-letter table, when there are more than DuckLake inlines and the
/// table is on; the file is written at the first attempt and kept for the
/// next ones. `None`: DuckDB inserts them.
fn letters_in_a_file(
    lake: &Lake,
    flush: &Flush,
    st: &mut Streamed,
    letters: &Letters,
) -> Result<Option<String>, SinkError> {
    let Some(table) = lake.cfg.dead_letter_table.as_deref() else {
        return Ok(None);
    };
    if letters.len() <= INLINED_ROWS {
        return Ok(None);
    }
    let transient = |e: String| SinkError::transient(connect::scrub(&lake.cfg.lake, &e));
    if st.letter_file.is_none() {
        let Ok(codec) = file_codec(lake)? else {
            return Ok(None);
        };
        let dir = Path::new(&lake.cfg.lake.data_path)
            .join(&lake.cfg.schema)
            .join(table);
        let remote = st.letters_remote.clone();
        let file = LetterFile::write(&dir, remote, &flush.id, letters, codec).map_err(transient)?;
        st.letter_file = Some(file);
    }
    let file = st.letter_file.as_mut().expect("written above");
    file.register_sql(&lake.cfg.schema, table)
        .map(Some)
        .map_err(transient)
}
