//! Streamed flushes written to Parquet as they arrive (`spool`), so the
//! writer never holds one whole: each batch is prepared, the table evolved
//! for it and its values brought to the live types, exactly as a flush sent
//! whole would be, then it is encoded and dropped. At the trailer the files
//! are registered with `ducklake_add_data_files` in the transaction that
//! records the flush's offsets and dead letters, so exactly-once holds as
//! for an insert.
//!
//! The first DUCKLAKE_FILES_FROM_BYTES of a flush are held: a smaller flush is
//! inserted by DuckDB as a whole (no small file per flush, its columns'
//! types decided over the whole flush). Past it, a new column's type is the
//! one of the batch that brings it.
//!
//! What only DuckDB's insert can do (VARIANT companions, partitioned
//! tables, object storage other than S3, values that need an engine cast, types
//! a file does not map exactly) keeps streamed flushes on the insert path.
//! Met before any file is written, the flush is held and inserted; met
//! later, or when the lake refuses the files at the commit, the sender is
//! asked to send the flush again whole ([`SinkErrorKind::ResendWhole`]).
//! Either way streamed flushes are held for the next ten minutes.

use millpond_shared::failpoint::{self, Failpoint};
use std::collections::BTreeSet;
use std::path::Path;

use arrow::record_batch::RecordBatch;
use millpond_proto::{DeadLetter, OffsetRange};
use millpond_shared::metrics::dead_letter_reason;

use super::config::RESERVED_COLUMNS;
use super::spool::{fits_a_file, Spool};
use super::sql::literal;
use super::table;
use super::to_live;
use super::types::duck_type;
use super::DuckLakeSink;
use crate::sink::prepare::{prepare, topic_at, NameCase};
use crate::sink::{Durable, Flush, Receipt, SinkError, SinkErrorKind};
use millpond_proto::AckOutcome;

/// How long streamed flushes are held after one the files could not take
/// (a table or flush shape only DuckDB's insert writes).
const FILES_PAUSE: std::time::Duration = std::time::Duration::from_secs(600);

/// A streamed flush being received.
#[derive(Default)]
pub struct Streamed {
    /// Which stream of this flush id (`Sink::stream_begin`).
    token: u64,
    held: Vec<RecordBatch>,
    held_bytes: usize,
    /// Where the rows go once past DUCKLAKE_FILES_FROM_BYTES.
    spool: Option<Spool>,
    /// Held whole and inserted (something only the insert path can do).
    hold: bool,
    /// Value-level dead letters found while spooling; their topic is set
    /// from the trailer's ranges.
    dead_letters: Vec<DeadLetter>,
    unsafe_names: BTreeSet<String>,
    reserved_names: BTreeSet<String>,
    rows_with_unsafe: u64,
    /// New keys past MILLPOND_MAX_COLUMNS, and values that did not convert
    /// (column, type, count): counted once the flush is written.
    over_limit: Vec<String>,
    unconverted: Vec<(String, String, usize)>,
    /// COMMIT was issued with these files: they may be in the lake, so
    /// they are never deleted.
    maybe_in_lake: bool,
    /// Columns the files hold that the table does not have yet: added in
    /// the transaction that registers the files.
    pending: NewColumns,
}

/// New columns in the order first seen: (spelling, DuckDB type), and
/// their index by lowercase name.
#[derive(Default)]
struct NewColumns {
    columns: Vec<(String, String)>,
    index: std::collections::HashMap<String, usize>,
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

    fn clear(&mut self) {
        *self = NewColumns::default();
    }
}

/// Why a batch cannot go to a file.
enum Refusal {
    /// The flush's or table's shape: only the insert path can write it.
    Shape(String),
    Failed(SinkError),
}

impl From<SinkError> for Refusal {
    fn from(e: SinkError) -> Self {
        Refusal::Failed(e)
    }
}

impl DuckLakeSink {
    /// Why this sink's configuration keeps every flush on the insert path.
    pub(super) fn files_refused_by_config(&self) -> Option<String> {
        if self.cfg.lake.data_path.contains("://") && self.remote.is_none() {
            Some("the data path is on object storage other than S3".into())
        } else if !self.cfg.variant_columns.is_empty() {
            Some("MILLPOND_VARIANT_COLUMNS is set".into())
        } else if self.cfg.partition_by.is_some() {
            Some("DUCKLAKE_PARTITION_BY is set".into())
        } else {
            None
        }
    }

    pub(super) fn begin_stream(&mut self, flush_id: &str) -> Option<u64> {
        if self.files_off.is_some() || self.closed {
            return None;
        }
        match self.files_paused_until {
            Some(until) if std::time::Instant::now() < until => return None,
            Some(_) => {
                tracing::info!("writing large streamed flushes to files again");
                self.files_paused_until = None;
            }
            None => {}
        }
        self.stream_tokens += 1;
        let st = Streamed {
            token: self.stream_tokens,
            ..Streamed::default()
        };
        if let Some(mut replaced) = self.streams.insert(flush_id.to_owned(), st) {
            tracing::warn!(flush_id = %flush_id, "a second stream of this flush began; the first one is refused from now on");
            forget(&mut replaced);
        }
        Some(self.stream_tokens)
    }

    pub(super) fn end_stream(&mut self, flush_id: &str, token: u64) {
        if self
            .streams
            .get(flush_id)
            .is_some_and(|st| st.token == token)
        {
            let mut st = self.streams.remove(flush_id).expect("just found");
            forget(&mut st);
        }
    }

    /// The state of stream `token` of `flush_id`, taken out of the map.
    fn take_stream(&mut self, flush_id: &str, token: u64) -> Result<Streamed, SinkError> {
        match self.streams.get(flush_id) {
            Some(st) if st.token == token => Ok(self.streams.remove(flush_id).expect("just found")),
            Some(_) => Err(resend_whole(&format!(
                "another stream of flush {flush_id} began after this one"
            ))),
            None => Err(resend_whole(&format!(
                "flush {flush_id} is not being received (the writer restarted or gave it up)"
            ))),
        }
    }

    pub(super) fn take_batch(
        &mut self,
        flush_id: &str,
        token: u64,
        batch: RecordBatch,
    ) -> Result<(), SinkError> {
        let mut st = self.take_stream(flush_id, token)?;
        match self.take_into(&mut st, batch) {
            Ok(()) => {
                self.streams.insert(flush_id.to_owned(), st);
                Ok(())
            }
            Err(e) => {
                forget(&mut st);
                // Whatever failed, the sender can send the flush whole.
                Err(match e.kind {
                    SinkErrorKind::ResendWhole => e,
                    _ => resend_whole(&e.message),
                })
            }
        }
    }

    fn take_into(&mut self, st: &mut Streamed, batch: RecordBatch) -> Result<(), SinkError> {
        if st.spool.is_some() {
            let schema = batch.schema();
            return match self.spool_rows(st, schema, vec![batch]) {
                Ok(()) => Ok(()),
                Err(Refusal::Failed(e)) => Err(resend_whole(&e.message)),
                Err(Refusal::Shape(why)) => {
                    self.turn_files_off(&why);
                    Err(resend_whole(&why))
                }
            };
        }
        st.held_bytes += batch.get_array_memory_size();
        st.held.push(batch);
        if st.hold || st.held_bytes < self.cfg.files_from_bytes {
            return Ok(());
        }
        let spooled = self.start_files(st);
        match spooled {
            Ok(()) => {
                st.held.clear();
                st.held_bytes = 0;
                Ok(())
            }
            Err(e) => {
                // Nothing is in a file yet: the flush is held and inserted.
                if let Some(mut spool) = st.spool.take() {
                    spool.remove();
                }
                st.dead_letters.clear();
                st.unsafe_names.clear();
                st.reserved_names.clear();
                st.rows_with_unsafe = 0;
                st.over_limit.clear();
                st.unconverted.clear();
                st.pending.clear();
                st.hold = true;
                match e {
                    Refusal::Shape(why) => self.turn_files_off(&why),
                    Refusal::Failed(e) => tracing::warn!(error = %e.message,
                        "writing a streamed flush to files failed; holding it for DuckDB's insert"),
                }
                Ok(())
            }
        }
    }

    /// Starts the flush's files with what it holds: checks the table,
    /// then writes the held batches. Nothing is in a file unless it passed.
    fn start_files(&mut self, st: &mut Streamed) -> Result<(), Refusal> {
        let (schema, batches) = aligned(st.held.clone())?;
        self.open_table()?;
        if let Some(why) = self.table_refuses_files()? {
            return Err(Refusal::Shape(why));
        }
        let codec = self.file_codec()?.map_err(Refusal::Shape)?;
        let live = self.live.as_ref().expect("read by open_table");
        let spool = Spool::new(self.table_dir(), codec, self.row_group_bytes(), live);
        st.spool = Some(match &self.remote {
            Some(remote) => spool.with_remote(remote.clone()),
            None => spool,
        });
        self.spool_rows(st, schema, batches)
    }

    /// Why the table itself needs DuckDB's insert: it is partitioned
    /// (files carry no partition values), or has a column of a type no file
    /// carries (`spool::uncarried`).
    fn table_refuses_files(&self) -> Result<Option<String>, SinkError> {
        let live = self.live.as_ref().expect("read by open_table");
        if let Some(why) = super::spool::uncarried(live) {
            return Ok(Some(why));
        }
        let conn = &self.session.as_ref().expect("session open").conn;
        let keys: i64 = conn
            .query_row(
                "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_partition_info p \
                 JOIN __ducklake_metadata_lake.ducklake_partition_column pc \
                   ON pc.partition_id = p.partition_id AND pc.table_id = p.table_id \
                 JOIN __ducklake_metadata_lake.ducklake_table t \
                   ON p.table_id = t.table_id AND t.end_snapshot IS NULL \
                 JOIN __ducklake_metadata_lake.ducklake_schema s \
                   ON t.schema_id = s.schema_id AND s.end_snapshot IS NULL \
                 WHERE p.end_snapshot IS NULL AND s.schema_name = ? AND t.table_name = ?",
                duckdb::params![self.cfg.schema, self.cfg.table],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok((keys > 0).then(|| "the table is partitioned".to_owned()))
    }

    fn turn_files_off(&mut self, why: &str) {
        tracing::warn!(why = %why, minutes = FILES_PAUSE.as_secs() / 60,
            "streamed flushes are held and inserted by DuckDB for a while");
        self.files_paused_until = Some(std::time::Instant::now() + FILES_PAUSE);
    }

    /// Reads the table's columns once per session, through `table::ensure`
    /// so the session's table settings are applied, when the table exists;
    /// otherwise `live` is empty, and the flush's columns create the table
    /// at the trailer (`pending_columns`).
    fn open_table(&mut self) -> Result<(), SinkError> {
        self.session()?;
        if self.live.is_some() {
            return Ok(());
        }
        let conn = &self.session.as_ref().expect("session open").conn;
        let cols = table::read_columns(conn, &self.cfg).map_err(|e| self.err(e))?;
        if cols.is_empty() {
            self.live = Some(cols);
        } else {
            let empty = arrow::datatypes::Schema::empty();
            table::ensure(conn, &self.cfg, &mut self.live, &empty)?;
        }
        Ok(())
    }

    /// `{data path}/{schema}/{table}`, where DuckLake puts the table's files.
    fn table_dir(&self) -> std::path::PathBuf {
        Path::new(&self.cfg.lake.data_path)
            .join(&self.cfg.schema)
            .join(&self.cfg.table)
    }

    /// The table's `parquet_compression` (most specific scope first) as a
    /// codec; `Ok(Err(why))` when the files cannot use it.
    fn file_codec(&self) -> Result<Result<parquet::basic::Compression, String>, SinkError> {
        let conn = &self.session.as_ref().expect("session open").conn;
        let sql = "SELECT option_name, value FROM lake.options() \
            WHERE option_name IN ('parquet_compression', 'parquet_compression_level') \
            AND (scope = 'GLOBAL' OR (scope = 'SCHEMA' AND scope_entry = ?) OR (scope = 'TABLE' AND scope_entry = ?)) \
            ORDER BY CASE scope WHEN 'TABLE' THEN 0 WHEN 'SCHEMA' THEN 1 ELSE 2 END";
        let table = format!("{}.{}", self.cfg.schema, self.cfg.table);
        let read = || -> duckdb::Result<Vec<(String, String)>> {
            let mut stmt = conn.prepare(sql)?;
            let rows = stmt.query_map(duckdb::params![self.cfg.schema, table], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
            rows.collect()
        };
        let options = read().map_err(|e| self.err(e))?;
        let first = |name: &str| {
            options
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let level = first("parquet_compression_level").and_then(|l| l.parse().ok());
        Ok(super::spool::codec(first("parquet_compression"), level))
    }

    fn row_group_bytes(&self) -> Option<usize> {
        self.cfg
            .row_group_bytes
            .as_deref()
            .and_then(|s| parse_size::parse_size(s).ok())
            .map(|b| b as usize)
    }

    /// Prepares rows as a flush sent whole would be, evolves the table
    /// for them, and writes them to the spool. Nothing reaches a file
    /// unless every check passed.
    fn spool_rows(
        &mut self,
        st: &mut Streamed,
        schema: arrow::datatypes::SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Result<(), Refusal> {
        let part = Flush {
            id: String::new(),
            trigger: Default::default(),
            ranges: Vec::new(),
            schema,
            batches,
            dead_letters: Vec::new(),
            streamed: None,
        };
        let mut p = prepare(
            &part,
            &RESERVED_COLUMNS,
            self.cfg.unsafe_names,
            NameCase::Insensitive,
        )?;
        drop(part);
        self.open_table()?;
        let conn = &self.session.as_ref().expect("session open").conn;
        let live = self.live.as_ref().expect("read by open_table");
        let plan = plan(&p.schema, live, &mut st.pending, self.cfg.max_columns)?;
        p.refuse(&plan.over_limit, dead_letter_reason::TOO_MANY_COLUMNS, &[]);
        let done =
            to_live::to_live(conn, &mut p, &plan.refused, &[]).map_err(SinkError::transient)?;
        if let Some((col, live)) = done.cast_in_sql.first() {
            return Err(Refusal::Shape(format!(
                "column {col} is {live} in the table, which values are cast to by DuckDB"
            )));
        }
        if let Some(f) = p
            .schema
            .fields()
            .iter()
            .find(|f| !fits_a_file(f.data_type()))
        {
            return Err(Refusal::Shape(format!(
                "column {} is {}, which a Parquet file does not carry exactly as DuckDB types it",
                f.name(),
                duck_type(f.data_type())
            )));
        }
        let spool = st.spool.as_mut().expect("spooling");
        for b in &p.batches {
            spool
                .write(b)
                .map_err(|e| Refusal::Failed(SinkError::transient(e)))?;
        }
        for key in plan.over_limit {
            if !st.over_limit.contains(&key) {
                st.over_limit.push(key);
            }
        }
        for (col, live, lost) in done.failed {
            match st
                .unconverted
                .iter_mut()
                .find(|(c, l, _)| *c == col && *l == live)
            {
                Some(seen) => seen.2 += lost,
                None => st.unconverted.push((col, live, lost)),
            }
        }
        st.dead_letters.append(&mut p.dead_letters);
        st.unsafe_names.extend(p.unsafe_names);
        st.reserved_names.extend(p.reserved_names);
        st.rows_with_unsafe += p.rows_with_unsafe;
        Ok(())
    }

    /// Writes a streamed flush at its trailer: held, it is inserted as a
    /// flush sent whole; spooled, its files are registered.
    pub(super) fn write_streamed(
        &mut self,
        flush: &Flush,
        token: u64,
    ) -> Result<Durable<Receipt>, SinkError> {
        let mut st = self.take_stream(&flush.id, token)?;
        let result = if st.spool.is_none() {
            let (schema, batches) = aligned(st.held.clone())?;
            let whole = Flush {
                schema,
                batches,
                streamed: None,
                ..flush.clone()
            };
            self.write_batches(&whole)
        } else {
            self.commit_files(flush, &mut st)
        };
        match &result {
            Ok(_) => {}
            Err(e) if e.kind == SinkErrorKind::ResendWhole => forget(&mut st),
            // Kept for the next attempt.
            Err(_) => {
                self.streams.insert(flush.id.clone(), st);
            }
        }
        result
    }

    fn commit_files(
        &mut self,
        flush: &Flush,
        st: &mut Streamed,
    ) -> Result<Durable<Receipt>, SinkError> {
        let spool = st.spool.as_mut().expect("spooled");
        spool.close().map_err(|e| resend_whole(&e))?;
        if let Some(receipt) = self.already_recorded(flush)? {
            if st.maybe_in_lake {
                spool.release();
            } else {
                spool.remove();
            }
            return Ok(receipt);
        }
        // The flush is planned against the table as the lake has it now.
        self.open_table()?;
        let (table_columns, unchanged) = self.lake_columns()?;
        let columns = self.pending_columns(st)?;
        let spool = st.spool.as_mut().expect("spooled");
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
        // For a lake on S3, the files are uploaded here.
        let files = spool
            .publish(st.maybe_in_lake)
            .map_err(|e| SinkError::transient(super::connect::scrub(&self.cfg.lake, &e)))?;
        let found: Vec<DeadLetter> = st
            .dead_letters
            .iter()
            .map(|l| with_topic(l, &flush.ranges))
            .collect();
        let letters: Vec<&DeadLetter> = flush.dead_letters.iter().chain(&found).collect();
        let dl_stream = self.register_dead_letters(&flush.id, &letters)?;
        let table = literal(&self.cfg.table);
        let schema = literal(&self.cfg.schema);
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
        let committed = self.commit(flush, &ddl, calls, dl_stream.is_some());
        st.maybe_in_lake |= self.commit_sent;
        if dl_stream.is_some() {
            let session = self.session.as_ref().expect("session open");
            let _ = session.execute_raw(&format!(
                "DROP VIEW IF EXISTS {}",
                super::dead_letters::SCAN
            ));
        }
        drop(dl_stream);
        let snapshot_id = committed.map_err(|e| {
            // The lake refused a file (a type another writer changed since,
            // a table partitioned meanwhile): the insert path can write it.
            if self.rows_refused && e.message.contains(super::classify::FILE_REFUSED) {
                // The table changed under the files: read it again.
                self.live = None;
                self.turn_files_off(&e.message);
                resend_whole(&e.message)
            } else {
                e
            }
        })?;
        let spool = st.spool.as_mut().expect("spooled");
        spool.release();
        if columns.evo.created {
            tracing::info!(table = %self.cfg.qualified_table(), columns = columns.schema.fields().len() + 1, "table created");
            // Read its columns as the lake has them at the next flush.
            self.live = None;
        } else if let Some(live) = self.live.as_mut() {
            table::assume(live, &columns.schema, &columns.evo);
        }
        self.columns_added(&columns.evo);
        self.count_names(&st.unsafe_names, st.rows_with_unsafe, &st.reserved_names);
        self.count_over_limit(&st.over_limit);
        self.count_unconverted(&st.unconverted);
        self.count_dead_letters(&flush.id, &letters);
        self.maybe_prune();
        Ok(Durable::new(Receipt {
            rows_written: spool.rows,
            dead_letters_written: if self.dead_letters.is_some() {
                letters.len() as u64
            } else {
                0
            },
            outcome: AckOutcome::Written,
            table: self.cfg.qualified_table(),
            snapshot_id,
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
    fn pending_columns(&mut self, st: &Streamed) -> Result<ColumnChanges, SinkError> {
        let fields: Vec<arrow::datatypes::Field> = st
            .pending
            .columns
            .iter()
            .map(|(name, t)| {
                let dt = super::spool::arrow_type(t).expect("pending types fit a file");
                arrow::datatypes::Field::new(name, dt, true)
            })
            .collect();
        let schema = arrow::datatypes::Schema::new(fields);
        // After a failed attempt the columns are read again here.
        self.open_table()?;
        if let Some(live) = self.live.as_ref().filter(|l| !l.is_empty()) {
            let (ddl, evo) = table::plan(live, &self.cfg, &schema);
            files_can_take(&evo)?;
            if let Some(col) = evo.widened.first() {
                return Err(resend_whole(&format!(
                    "column {col} is narrower in the table than in the files: widening it is DuckDB's insert's work"
                )));
            }
            return Ok(ColumnChanges { ddl, schema, evo });
        }
        if let Some(create) = table::create_in_write(&self.cfg, &schema) {
            let evo = table::Evolution {
                created: true,
                ..Default::default()
            };
            return Ok(ColumnChanges {
                ddl: vec![create],
                schema,
                evo,
            });
        }
        let conn = &self.session.as_ref().expect("session open").conn;
        let evo = table::ensure(conn, &self.cfg, &mut self.live, &schema)?;
        self.columns_added(&evo);
        files_can_take(&evo)?;
        Ok(ColumnChanges {
            ddl: Vec::new(),
            schema: arrow::datatypes::Schema::empty(),
            evo: table::Evolution::default(),
        })
    }

    /// The table's columns as the lake has them now, not as the session
    /// last read them, as the fields a file carries (`spool::fill` adds
    /// every one a file lacks), and the statement that fails the write
    /// transaction if their number changed by then. The session keeps them
    /// for planning this flush and the next one's files. A column no file
    /// can carry (another writer's) sends the flush to the insert path.
    fn lake_columns(
        &mut self,
    ) -> Result<(Vec<arrow::datatypes::Field>, Option<String>), SinkError> {
        let conn = &self.session.as_ref().expect("session open").conn;
        let cols = table::read_columns(conn, &self.cfg).map_err(|e| self.err(e))?;
        let unchanged = table::columns_unchanged_sql(&self.cfg, &cols);
        let fields = super::spool::file_fields(&cols);
        let uncarried = super::spool::uncarried(&cols);
        // Kept even then: the next flush's files are refused at their start.
        self.live = Some(cols);
        if let Some(why) = uncarried {
            self.turn_files_off(&why);
            return Err(resend_whole(&why));
        }
        Ok((fields, unchanged))
    }

    fn columns_added(&self, evo: &table::Evolution) {
        for c in &evo.added {
            tracing::info!(column = %c, "column added");
        }
        self.metrics
            .schema_columns_added
            .inc_by(evo.added.len() as u64);
    }
}

/// Refuses the files when the table has one of their columns with another
/// type, or has no room left for one of them.
fn files_can_take(evo: &table::Evolution) -> Result<(), SinkError> {
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

/// Columns a flush's files bring, added in its write transaction.
struct ColumnChanges {
    ddl: Vec<String>,
    schema: arrow::datatypes::Schema,
    evo: table::Evolution,
}

/// How one prepared batch meets the table and the columns this flush
/// already adds.
struct Plan {
    /// Columns whose values must be converted: (name, type, batch type).
    refused: Vec<to_live::Refused>,
    /// New keys past MILLPOND_MAX_COLUMNS.
    over_limit: Vec<String>,
}

/// Compares a batch's columns with the table's (`live`) and those the
/// flush adds (`pending`, grown here by the batch's new keys). A column
/// the table holds with another type is converted to it, as for a flush
/// sent whole; one only a catalog change could take (a widening) is a
/// shape only the insert path writes.
fn plan(
    schema: &arrow::datatypes::Schema,
    live: &table::LiveColumns,
    pending: &mut NewColumns,
    max_columns: usize,
) -> Result<Plan, Refusal> {
    let mut out = Plan {
        refused: Vec::new(),
        over_limit: Vec::new(),
    };
    let payload =
        |live: &table::LiveColumns| live.keys().filter(|c| c.as_str() != "_inserted_at").count();
    for f in schema.fields() {
        let lower = f.name().to_ascii_lowercase();
        let batch_type = duck_type(f.data_type());
        let known = live.get(&lower).or_else(|| pending.get(&lower));
        match known {
            Some(t) if *t == batch_type => {}
            Some(t) if super::types::is_widening(t, &batch_type) => {
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

/// Deletes a stream's files unless a COMMIT may have made them part of
/// the lake (then orphan cleanup decides, from the catalog).
pub(super) fn forget(st: &mut Streamed) {
    if let Some(spool) = st.spool.as_mut() {
        if st.maybe_in_lake {
            tracing::warn!(
                files = spool.files.len(),
                "a streamed flush's files may be in the lake; keeping them"
            );
            spool.release();
        } else {
            spool.remove();
        }
    }
}

fn resend_whole(why: &str) -> SinkError {
    SinkError::new(
        SinkErrorKind::ResendWhole,
        format!("the streamed flush cannot be written as it arrived ({why}); send it whole"),
    )
}

/// Held batches as one schema, as a flush sent whole is aligned.
fn aligned(
    held: Vec<RecordBatch>,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), SinkError> {
    let aligned = millpond_shared::unify::aligned(held)
        .map_err(|e| SinkError::permanent(format!("aligning the flush's batches: {e}")))?;
    Ok(aligned.unwrap_or_else(|| {
        (
            std::sync::Arc::new(arrow::datatypes::Schema::empty()),
            Vec::new(),
        )
    }))
}

/// A dead letter found before the ranges were known, with its topic.
fn with_topic(l: &DeadLetter, ranges: &[OffsetRange]) -> DeadLetter {
    let mut l = l.clone();
    if l.topic.is_empty() {
        let at = (l.partition >= 0).then_some((l.partition, l.offset));
        l.topic = topic_at(ranges, at).to_owned();
    }
    l
}
