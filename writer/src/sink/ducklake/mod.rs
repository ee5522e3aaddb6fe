//! The DuckLake sink: DuckDB with the ducklake extension, catalog in a local
//! file or Postgres, data in a folder or on S3.
//!
//! A write stages the Arrow batches in the session's own database, then in
//! one lake transaction inserts them by name (stamping `_inserted_at`),
//! stores the flush's dead letters and records its offset ranges. A flush
//! whose ranges the lake already holds is acknowledged without writing,
//! which makes resends after a writer crash exactly-once.
mod classify;
pub mod config;
pub mod connect;
mod dead_letters;
mod dual_write;
mod fence;
pub mod lake_config;
pub mod lease_owner;
mod offsets;
pub mod partition_by;
mod pg_tls;
pub mod session;
pub(crate) mod spool;
pub mod sql;
mod streamed;
mod table;
mod to_live;
mod types;
mod variant;

pub use connect::extensions;

use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::RecordBatch;
use duckdb::Connection;
use millpond_shared::failpoint::{self, Failpoint};

use self::session::Session;
use millpond_proto::{AckOutcome, OffsetRange};
use millpond_shared::metrics::{dead_letter_reason, error_type, skip_reason, WriterMetrics};
use millpond_shared::retry::Ladder;

use self::classify::lake_error;
use self::config::{DuckLakeConfig, LAST_RECORDS_TABLE, OFFSETS_TABLE, RESERVED_COLUMNS};
use self::dead_letters::DeadLetterTable;
use self::dual_write::DualWrite;
use self::fence::Fence;
use self::offsets::{coverage, Coverage, KnownOffsets, OffsetsTable};
use self::table::LiveColumns;
use super::prepare::{prepare, NameCase, Prepared};
use super::{Durable, Flush, Receipt, Sink, SinkError, SinkErrorKind};
use millpond_proto::DeadLetter;

/// Name of the Arrow scan view over the flush being written.
const SCAN: &str = "millpond_flush";
/// Prune superseded offset rows every this many flushes.
const PRUNE_EVERY: u64 = 200;

pub struct DuckLakeSink {
    cfg: DuckLakeConfig,
    metrics: WriterMetrics,
    session: Option<Session>,
    live: Option<LiveColumns>,
    offsets: OffsetsTable,
    /// What the offsets table held when last read or written: spares the
    /// read before most flushes.
    known: KnownOffsets,
    dead_letters: Option<DeadLetterTable>,
    offsets_ready: bool,
    flushes: u64,
    fence: Fence,
    /// uuid rewrites already logged: (column, live type).
    uuid_rewrites: std::collections::HashSet<(String, String)>,
    /// Whether the last `commit` issued COMMIT, and whether it failed on
    /// a statement adding the flush's rows.
    commit_sent: bool,
    rows_refused: bool,
    /// Streamed flushes being received, by flush id.
    streams: std::collections::HashMap<String, streamed::Streamed>,
    /// The token of the last stream begun.
    stream_tokens: u64,
    /// Why this configuration never writes streamed flushes to files.
    files_off: Option<String>,
    /// Closed: no stream begins any more.
    closed: bool,
    /// Until when streamed flushes are held after one the files could not
    /// take.
    files_paused_until: Option<std::time::Instant>,
    /// A data path on S3: where files are uploaded before registration.
    remote: Option<std::sync::Arc<spool::Remote>>,
}

impl DuckLakeSink {
    /// Connects at once, so a wrong catalog, a missing extension or bad
    /// credentials fail at startup rather than on the first flush.
    pub fn connect(cfg: DuckLakeConfig, metrics: WriterMetrics) -> Result<Self, SinkError> {
        match &cfg.lake.catalog {
            config::Catalog::Embedded { path, format } => tracing::info!(
                catalog = %path.display(),
                format = ?format,
                data_path = %cfg.lake.data_path,
                "embedded DuckLake: local catalog file, no Postgres configured (set DUCKLAKE_RDS_HOST for production)"
            ),
            config::Catalog::Postgres {
                host,
                port,
                database,
                tls,
                ..
            } => tracing::info!(
                host = %host, port, database = %database, data_path = %cfg.lake.data_path,
                tls = %tls.describe(), "DuckLake catalog in Postgres"
            ),
        }
        let offsets = OffsetsTable {
            name: cfg.sql_name(OFFSETS_TABLE),
            target: cfg.table.clone(),
            last_records: cfg.sql_name(LAST_RECORDS_TABLE),
        };
        let dead_letters = cfg.dead_letter_table.as_ref().map(|t| DeadLetterTable {
            name: cfg.sql_name(t),
        });
        let (cfg_owner, cfg_lease) = (cfg.lease_owner.clone(), cfg.partition_lease);
        let remote = spool::Remote::for_data_path(
            &cfg.lake.data_path,
            cfg.lake.s3.as_ref(),
            &format!("{}/{}", cfg.schema, cfg.table),
            &std::env::temp_dir().join("millpond-writer-spool"),
        )
        .map_err(SinkError::permanent)?
        .map(std::sync::Arc::new);
        let mut sink = DuckLakeSink {
            cfg,
            metrics,
            session: None,
            live: None,
            offsets,
            known: KnownOffsets::default(),
            dead_letters,
            offsets_ready: false,
            flushes: 0,
            fence: Fence::new(cfg_owner, cfg_lease),
            uuid_rewrites: std::collections::HashSet::new(),
            commit_sent: false,
            rows_refused: false,
            streams: std::collections::HashMap::new(),
            stream_tokens: 0,
            files_off: None,
            closed: false,
            files_paused_until: None,
            remote,
        };
        sink.files_off = sink.files_refused_by_config();
        if let Some(why) = &sink.files_off {
            tracing::info!(why = %why, "streamed flushes are held and inserted by DuckDB, not written to files as they arrive");
        }
        sink.session()?;
        sink.ensure_own_tables()?;
        Ok(sink)
    }

    fn conn(&self) -> &Connection {
        &self.session.as_ref().expect("session open").conn
    }

    fn session(&mut self) -> Result<&Connection, SinkError> {
        if self.session.is_none() {
            self.session = Some(connect::open(&self.cfg.lake)?);
        }
        Ok(&self.session.as_ref().expect("just opened").conn)
    }

    /// Creates the writer's own tables when missing: the offsets table, the
    /// dead-letter table and (with the partition fence) the lease table, in
    /// one catalog commit (each commit makes DuckLake reload the catalog).
    /// If that fails (another writer creating them at the same moment),
    /// each is created on its own and checked.
    fn ensure_own_tables(&mut self) -> Result<(), SinkError> {
        if self.offsets_ready {
            return Ok(());
        }
        let sql = self.offsets.create_sql();
        self.session()?;
        let conn = self.conn();
        table::ensure_schema(conn, &self.cfg);
        let mut tables = vec![
            (sql, self.offsets.name.clone()),
            (
                self.offsets.create_last_records_sql(),
                self.offsets.last_records.clone(),
            ),
        ];
        if let Some(dl) = &self.dead_letters {
            tables.push((dl.create_sql(), dl.name.clone()));
        }
        if self.cfg.partition_fence {
            let name = fence::sql_table(&self.cfg);
            tables.push((fence::create_sql(&self.cfg), name));
        }
        let creates: Vec<&str> = tables.iter().map(|(sql, _)| sql.as_str()).collect();
        let together = format!("BEGIN TRANSACTION;\n{};\nCOMMIT", creates.join(";\n"));
        if conn.execute_batch(&together).is_err() {
            let _ = conn.execute_batch("ROLLBACK");
            for (sql, name) in &tables {
                if let Err(e) = conn.execute_batch(sql) {
                    let exists = conn.execute_batch(&format!("SELECT 1 FROM {name} LIMIT 0"));
                    if exists.is_err() {
                        return Err(self.err(e));
                    }
                }
            }
        }
        // Keep offset rows in the catalog instead of one tiny file per flush.
        for table in [OFFSETS_TABLE, LAST_RECORDS_TABLE] {
            let _ = conn.execute_batch(&format!(
                "CALL lake.set_option('data_inlining_row_limit', 1000, schema => {}, table_name => {})",
                sql::literal(&self.cfg.schema),
                sql::literal(table)
            ));
        }
        if self.cfg.partition_fence {
            self.fence.table_created();
        }
        self.offsets_ready = true;
        Ok(())
    }

    fn err(&self, e: duckdb::Error) -> SinkError {
        lake_error(&self.cfg.lake, &e.to_string())
    }

    /// Registers the prepared batches as the Arrow scan view SCAN. No
    /// copy: DuckDB reads the Arrow buffers during the insert.
    fn register_scan(&self, p: &Prepared) -> Result<(u64, Box<FFI_ArrowArrayStream>), SinkError> {
        let batches: Vec<_> = p
            .batches
            .iter()
            .filter(|b| b.num_rows() > 0)
            .cloned()
            .collect();
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let session = self.session.as_ref().expect("session open");
        let stream = session
            .register_arrow(SCAN, p.schema.clone(), batches)
            .map_err(|e| lake_error(&self.cfg.lake, &e))?;
        // Stays boxed: DuckDB holds a pointer to it until the view is dropped.
        Ok((rows, stream))
    }

    /// Registers the flush's dead letters (record-level from ingest, then
    /// value-level found here) as the view dead_letters::SCAN, when there
    /// are any and the table is on.
    fn register_dead_letters(
        &self,
        flush_id: &str,
        letters: &[&DeadLetter],
    ) -> Result<Option<Box<FFI_ArrowArrayStream>>, SinkError> {
        if letters.is_empty() || self.dead_letters.is_none() {
            return Ok(None);
        }
        let (schema, batch) = crate::sink::dead_letters::batch(flush_id, letters);
        let session = self.session.as_ref().expect("session open");
        let stream = session
            .register_arrow(dead_letters::SCAN, schema, vec![batch])
            .map_err(|e| lake_error(&self.cfg.lake, &e))?;
        Ok(Some(stream))
    }

    /// After the commit: every dead letter counted by reason, records and
    /// values apart; with the table off, also said in the log (they are
    /// then discarded).
    fn count_dead_letters(&self, flush_id: &str, letters: &[&DeadLetter]) {
        crate::sink::count_dead_letters(&self.metrics, letters);
        if self.dead_letters.is_none() && !letters.is_empty() {
            tracing::warn!(flush_id = %flush_id, count = letters.len(),
                "dead letters discarded: DUCKLAKE_DEAD_LETTER_TABLE is off");
        }
    }

    /// Logs and counts the refused names of a flush: unsafe ones, the
    /// records that lost a value to them, and reserved ones.
    fn count_names<'a>(
        &self,
        unsafe_names: impl IntoIterator<Item = &'a String>,
        rows_with_unsafe: u64,
        reserved_names: impl IntoIterator<Item = &'a String>,
    ) {
        for name in unsafe_names {
            tracing::warn!(column = %name, "payload key is not a safe identifier; its values go to the dead-letter table");
        }
        if rows_with_unsafe > 0 {
            // Records that lost at least one value, not names.
            self.metrics
                .records_skipped
                .with_label_values(&[skip_reason::UNSAFE_FIELD_NAME])
                .inc_by(rows_with_unsafe);
        }
        for name in reserved_names {
            tracing::error!(column = %name, "payload key is reserved (_inserted_at, year, month, day, hour, _millpond_*); its values go to the dead-letter table; rename it upstream");
            self.metrics
                .errors
                .with_label_values(&[error_type::SCHEMA])
                .inc();
        }
    }

    /// New keys the table had no room for (MILLPOND_MAX_COLUMNS).
    fn count_over_limit(&self, over_limit: &[String]) {
        if let Some(first) = over_limit.first() {
            tracing::warn!(columns = over_limit.len(), first = %first,
                max_columns = self.cfg.max_columns,
                "table is at MILLPOND_MAX_COLUMNS; values of new keys go to the dead-letter table");
            self.metrics
                .errors
                .with_label_values(&[error_type::SCHEMA])
                .inc();
        }
    }

    /// Columns whose values did not all convert to the column's type.
    fn count_unconverted(&self, failed: &[(String, String, usize)]) {
        for (col, live, lost) in failed {
            tracing::warn!(column = %col, live_type = %live, values = lost,
                "values that do not convert exactly to the column's type are NULL; they are in the dead-letter table");
            self.metrics
                .errors
                .with_label_values(&[error_type::SCHEMA])
                .inc();
        }
    }

    /// The INSERT of `rows` rows read from the scan view through `select`.
    fn insert_sql(&self, rows: u64, select: Option<&str>) -> Option<String> {
        let table = self.cfg.sql_table();
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

    /// One lake transaction: the offsets re-checked, `ddl` (the columns
    /// the rows need), `rows` (statements that add the flush's rows), the
    /// dead letters when their view is registered, the offset ranges
    /// recorded. `self.commit_sent` says whether COMMIT was issued (after
    /// which the outcome is unknown until the offsets are read again).
    fn commit(
        &mut self,
        flush: &Flush,
        ddl: &[String],
        rows: Vec<String>,
        dead_letters: bool,
    ) -> Result<Option<i64>, SinkError> {
        self.commit_sent = false;
        self.rows_refused = false;
        let mut head = vec!["BEGIN TRANSACTION".to_owned()];
        head.extend(self.offsets.recheck_sql(&flush.ranges));
        head.extend(ddl.iter().cloned());
        let mut tail = Vec::new();
        if let (true, Some(dl)) = (dead_letters, &self.dead_letters) {
            tail.push(dl.insert_sql());
        }
        if let Some(s) = self.offsets.insert_sql(&flush.id, &flush.ranges) {
            tail.push(s);
        }
        if self.cfg.partition_fence {
            tail.push(self.fence.write_sql(&self.cfg));
        }
        let session = self.session.as_ref().expect("session open");
        let mut result = session.execute_raw(&head.join(";\n"));
        // One statement at a time: a failure here is the rows' own.
        for statement in &rows {
            if result.is_ok() {
                result = session.execute_raw(statement);
                self.rows_refused = result.is_err();
            }
        }
        if result.is_ok() && !tail.is_empty() {
            result = session.execute_raw(&tail.join(";\n"));
        }
        if result.is_ok() {
            failpoint::pause(Failpoint::PauseBeforeCommit);
            if self.cfg.partition_fence && !self.fence.still_held(&flush.ranges) {
                let _ = session.execute_raw("ROLLBACK");
                return Err(SinkError::new(
                    super::SinkErrorKind::Contention(super::SinkId::DuckLake),
                    "partition lease too close to its end to commit; renewing it first",
                ));
            }
            failpoint::pause(Failpoint::StallInCommit);
            self.commit_sent = true;
            result = session.execute_raw("COMMIT");
        }
        if let Err(e) = result {
            let _ = session.execute_raw("ROLLBACK");
            // The outcome may be unknown: read the offsets again next time.
            self.known.forget();
            // Maybe another owner's claim (the fence): claim again.
            self.fence.forget(&flush.ranges);
            return Err(lake_error(&self.cfg.lake, &e));
        }
        self.known.committed(&flush.ranges);
        let snapshot = session
            .conn
            .query_row("SELECT id FROM lake.current_snapshot()", [], |r| {
                r.get::<_, i64>(0)
            })
            .ok();
        Ok(snapshot)
    }

    fn maybe_prune(&mut self) {
        self.flushes += 1;
        if !self.flushes.is_multiple_of(PRUNE_EVERY) {
            return;
        }
        if let Some(session) = &self.session {
            let conn = &session.conn;
            if let Err(e) = conn.execute_batch(&self.offsets.prune_sql()) {
                let e = connect::scrub(&self.cfg.lake, &e.to_string());
                tracing::info!(error = %e, "pruning old offset rows failed; will try again later");
            }
        }
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

impl DuckLakeSink {
    /// `Some` when the lake already holds the flush's ranges (a resend):
    /// the receipt that acknowledges it without writing. A flush that
    /// overlaps recorded ranges without matching them is refused. The
    /// offsets table is read only when some range does not start past what
    /// this writer knows was recorded (`KnownOffsets`).
    fn already_recorded(&mut self, flush: &Flush) -> Result<Option<Durable<Receipt>>, SinkError> {
        self.session()?;
        self.ensure_own_tables()?;
        let skipped = self.known.all_new(&flush.ranges);
        let seen = if skipped {
            Coverage::New
        } else {
            let mut topics: Vec<&str> = flush.ranges.iter().map(|r| r.topic.as_str()).collect();
            topics.sort_unstable();
            topics.dedup();
            let mut recorded = Vec::new();
            for topic in topics {
                recorded.extend(self.recorded_offsets(topic)?);
            }
            coverage(&flush.ranges, &recorded)
        };
        match seen {
            Coverage::AlreadyRecorded => {
                self.metrics.flushes_already_recorded.inc();
                let ids = self
                    .offsets
                    .flush_ids(self.conn(), &flush.ranges)
                    .map_err(|e| self.err(e))?;
                let another = ids.iter().any(|id| *id != flush.id);
                tracing::info!(flush_id = %flush.id, by_another_flush = another,
                    "flush already recorded in the lake; acknowledging without writing");
                Ok(Some(Durable::new(Receipt {
                    rows_written: 0,
                    dead_letters_written: 0,
                    outcome: AckOutcome::AlreadyRecorded,
                    table: self.cfg.qualified_table(),
                    snapshot_id: None,
                    recorded: flush.ranges.clone(),
                    recorded_by_another_flush: another,
                })))
            }
            Coverage::Overlap(why) => {
                // Whoever recorded them may record more: read again next time.
                self.known.forget();
                Err(SinkError::new(
                    SinkErrorKind::Overlap,
                    format!(
                        "flush {} overlaps offsets the lake already recorded: {why}",
                        flush.id
                    ),
                ))
            }
            Coverage::New => {
                if self.cfg.partition_fence {
                    let conn = &self.session.as_ref().expect("session open").conn;
                    match self.fence.hold(conn, &self.cfg, &flush.ranges) {
                        Err(e) => {
                            // Another writer may record these partitions now.
                            self.known.forget();
                            return Err(e);
                        }
                        // Taken over rather than renewed: another writer may
                        // have recorded more since the offsets were known.
                        Ok(true) if skipped => {
                            self.known.forget();
                            return self.already_recorded(flush);
                        }
                        Ok(_) => {}
                    }
                }
                Ok(None)
            }
        }
    }

    /// Writes a flush whose batches are in memory: staged as an Arrow scan
    /// and inserted by DuckDB.
    fn write_batches(&mut self, flush: &Flush) -> Result<Durable<Receipt>, SinkError> {
        if let Some(receipt) = self.already_recorded(flush)? {
            return Ok(receipt);
        }
        let table = self.cfg.qualified_table();

        let mut prepared = prepare(
            flush,
            &RESERVED_COLUMNS,
            self.cfg.unsafe_names,
            NameCase::Insensitive,
        )?;
        self.count_names(
            &prepared.unsafe_names,
            prepared.rows_with_unsafe,
            &prepared.reserved_names,
        );
        let mut rows_in = flush.rows();
        let mut cast = Vec::new();
        let mut dual = DualWrite::default();
        let mut collided: Vec<DeadLetter> = Vec::new();
        // Counted once the flush is committed.
        let mut stripped = 0u64;
        if rows_in > 0 {
            let conn = &self.session.as_ref().expect("session open").conn;
            let strip = {
                let fetched;
                let live = match &self.live {
                    Some(l) => l,
                    None => {
                        fetched = table::read_columns(conn, &self.cfg).map_err(|e| self.err(e))?;
                        &fetched
                    }
                };
                dual_write::collisions(&prepared.schema, &self.cfg.variant_columns, live)
            };
            if !strip.is_empty() {
                tracing::warn!(columns = ?strip, "payload keys collide with VARIANT companions; their values are dead letters (variant_companion_collision)");
                stripped = strip.len() as u64;
                if strip.len() == prepared.schema.fields().len() {
                    // Nothing else in these records: they are dead letters whole.
                    collided =
                        dual_write::rows_as_dead_letters(&mut prepared, &strip, &flush.ranges);
                    rows_in = 0;
                } else {
                    prepared.refuse(
                        &strip,
                        dead_letter_reason::VARIANT_COMPANION_COLLISION,
                        &flush.ranges,
                    );
                }
            }
        }
        if rows_in > 0 {
            let conn = &self.session.as_ref().expect("session open").conn;
            let evo = table::ensure(conn, &self.cfg, &mut self.live, &prepared.schema)?;
            self.metrics
                .schema_columns_added
                .inc_by(evo.added.len() as u64);
            self.metrics
                .schema_columns_widened
                .inc_by(evo.widened.len() as u64);
            for c in &evo.added {
                tracing::info!(column = %c, "column added");
            }
            self.count_over_limit(&evo.over_limit);
            prepared.refuse(
                &evo.over_limit,
                dead_letter_reason::TOO_MANY_COLUMNS,
                &flush.ranges,
            );
            for (col, live, batch) in &evo.refused {
                if to_live::is_uuid_rewrite(live, batch) {
                    // The pin and the live column disagree: the live one wins.
                    self.metrics
                        .errors
                        .with_label_values(&[error_type::SCHEMA])
                        .inc();
                    if self.uuid_rewrites.insert((col.clone(), live.clone())) {
                        tracing::warn!(column = %col, live_type = %live, batch_type = %batch,
                            "uuid column pinned one way and live the other; values are rewritten to the live type (said once per column and direction)");
                    }
                }
            }
            let done = to_live::to_live(conn, &mut prepared, &evo.refused, &flush.ranges)
                .map_err(|e| lake_error(&self.cfg.lake, &e))?;
            self.count_unconverted(&done.failed);
            cast = done.cast_in_sql;
            if !self.cfg.variant_columns.is_empty() {
                let live = self.live.as_mut().expect("read by ensure");
                dual = dual_write::companions(conn, &self.cfg, live, &mut prepared)
                    .map_err(|e| lake_error(&self.cfg.lake, &e))?;
                for (source, why) in &dual.omitted {
                    tracing::warn!(column = %source, why = %why, "VARIANT companion not written for this source; its text column still lands");
                }
            }
        }
        let letters: Vec<&DeadLetter> = flush
            .dead_letters
            .iter()
            .chain(&prepared.dead_letters)
            .chain(&collided)
            .collect();
        // A record whose keys were all dropped, or `{}`, is still a row.
        let (rows, stream) = if rows_in == 0 {
            (0, None)
        } else if prepared.schema.fields().is_empty() {
            (rows_in as u64, None)
        } else {
            let (rows, stream) = self.register_scan(&prepared)?;
            (rows, Some(stream))
        };
        let dl_stream = self.register_dead_letters(&flush.id, &letters)?;
        let select = stream.as_ref().map(|_| {
            insert_projection(
                &prepared.schema,
                &cast,
                &dual_write::scan_only(&dual),
                dual_write::terms(&dual),
            )
        });
        let insert = self.insert_sql(rows, select.as_deref());
        let mut committed = self.commit(
            flush,
            &[],
            insert.into_iter().collect(),
            dl_stream.is_some(),
        );
        let mut stream = stream;
        let mut dl_stream = dl_stream;
        if matches!(&committed, Err(e) if !dual.companions.is_empty() && dual_write::is_overflow(&e.message))
        {
            // The backstop: a value the scan could not reach overflowed while
            // shredding. The same flush again, text columns only.
            let e = committed.as_ref().err().map(|e| e.message.clone());
            tracing::error!(flush_id = %flush.id, error = ?e, "VARIANT shredding overflowed; writing this flush without its companions");
            self.metrics.variant_write_fallback.inc();
            self.metrics
                .errors
                .with_label_values(&[error_type::VARIANT_WRITE])
                .inc();
            let session = self.session.as_ref().expect("session open");
            let _ = session.execute_raw(&format!("DROP VIEW IF EXISTS {SCAN}"));
            let _ = session.execute_raw(&format!("DROP VIEW IF EXISTS {}", dead_letters::SCAN));
            drop(stream.take());
            drop(dl_stream.take());
            stream = Some(self.register_scan(&prepared)?.1);
            dl_stream = self.register_dead_letters(&flush.id, &letters)?;
            let plain = insert_projection(
                &prepared.schema,
                &cast,
                &dual_write::scan_only(&dual),
                Vec::new(),
            );
            let insert = self.insert_sql(rows, Some(&plain));
            committed = self.commit(
                flush,
                &[],
                insert.into_iter().collect(),
                dl_stream.is_some(),
            );
        }
        if committed.is_ok() {
            self.metrics.variant_values_coerced.inc_by(dual.coerced);
            self.metrics
                .variant_companion_columns_dropped
                .inc_by(stripped);
            // As the original counted them: records that had nothing but
            // colliding keys (here dead letters whole, counted there too).
            self.metrics
                .records_skipped
                .with_label_values(&[skip_reason::VARIANT_COMPANION_COLLISION])
                .inc_by(collided.len() as u64);
            self.metrics
                .errors
                .with_label_values(&[error_type::SCHEMA])
                .inc_by(dual.omitted.len() as u64);
        }
        let session = self.session.as_ref().expect("session open");
        if stream.is_some() {
            let _ = session.execute_raw(&format!("DROP VIEW IF EXISTS {SCAN}"));
        }
        if dl_stream.is_some() {
            let _ = session.execute_raw(&format!("DROP VIEW IF EXISTS {}", dead_letters::SCAN));
        }
        // The views are gone; now the streams (and the batches they hold) may go.
        drop(stream);
        drop(dl_stream);
        let snapshot_id = committed?;
        self.count_dead_letters(&flush.id, &letters);
        self.maybe_prune();
        Ok(Durable::new(Receipt {
            rows_written: rows,
            dead_letters_written: if self.dead_letters.is_some() {
                letters.len() as u64
            } else {
                0
            },
            outcome: AckOutcome::Written,
            table,
            snapshot_id,
            recorded: flush.ranges.clone(),
            recorded_by_another_flush: false,
        }))
    }
}

impl Sink for DuckLakeSink {
    /// Without a deadline ([`Sink::deadline`]): the writer's ladder and
    /// DUCKLAKE_MAX_RETRY_COUNT bound the write.
    fn write(
        &mut self,
        flush: &Flush,
        _deadline: millpond_shared::deadline::Deadline,
    ) -> Result<Durable<Receipt>, SinkError> {
        match flush.streamed {
            Some(token) => self.write_streamed(flush, token),
            None => self.write_batches(flush),
        }
    }

    fn stream_begin(&mut self, flush_id: &str) -> Option<u64> {
        self.begin_stream(flush_id)
    }

    fn stream_batch(
        &mut self,
        flush_id: &str,
        token: u64,
        batch: RecordBatch,
    ) -> Result<(), SinkError> {
        self.take_batch(flush_id, token, batch)
    }

    fn stream_end(&mut self, flush_id: &str, token: u64) {
        self.end_stream(flush_id, token);
    }

    fn reset_caches(&mut self) {
        // Drop the whole session: after an outage the attached catalog
        // connection may be dead, and another writer may have changed the
        // table; the next attempt reconnects and re-reads everything.
        self.live = None;
        self.known.forget();
        self.offsets_ready = false;
        self.fence.reset();
        self.session = None;
    }

    fn recorded_offsets(&mut self, topic: &str) -> Result<Vec<OffsetRange>, SinkError> {
        self.session()?;
        self.ensure_own_tables()?;
        let conn = self.conn();
        let found = self.offsets.read(conn, topic).map_err(|e| self.err(e))?;
        self.known.read(topic, &found);
        Ok(found)
    }

    fn retry_ladder(&self) -> Ladder {
        Ladder::LAKE_WRITE
    }

    fn name(&self) -> &'static str {
        "ducklake"
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.closed = true;
        for (id, mut st) in self.streams.drain() {
            tracing::info!(flush_id = %id, "closing with a streamed flush unwritten; its sender sends it again");
            streamed::forget(&mut st);
        }
        if let Some(session) = self.session.take() {
            if self.cfg.partition_fence {
                self.fence.release(&session.conn, &self.cfg);
            }
            let _ = session.conn.execute_batch("DETACH lake");
        }
        Ok(())
    }
}
