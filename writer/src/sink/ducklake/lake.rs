//! The lake as this writer reaches it: its configuration, the DuckDB
//! session (opened again after an outage), the writer's own tables (the
//! offsets, the dead letters, the leases), what it caches of the lake and
//! the partition fence. The write paths borrow it; it holds no flush.
use duckdb::Connection;
use millpond_proto::OffsetRange;
use millpond_shared::metrics::WriterMetrics;

use super::caches::Caches;
use super::catalog_indexes;
use super::classify::lake_error;
use super::commit_lock::{self, CommitLock};
use super::config::{Catalog, DuckLakeConfig};
use super::dead_letters::DeadLetterTable;
use super::fence::{self, Fence};
use super::names::{LAST_RECORDS_TABLE, OFFSETS_TABLE};
use super::offsets::OffsetsTable;
use super::session::Session;
use super::{connect, sql, table};
use crate::sink::SinkError;

/// Prune superseded offset rows every this many flushes.
const PRUNE_EVERY: u64 = 200;

pub struct Lake {
    pub cfg: DuckLakeConfig,
    pub metrics: WriterMetrics,
    session: Option<Session>,
    pub offsets: OffsetsTable,
    pub dead_letters: Option<DeadLetterTable>,
    pub caches: Caches,
    pub fence: Fence,
    /// Postgres catalogs: write transactions take turns (commit_lock.rs).
    commit_lock: Option<CommitLock>,
    /// Flushes written: every PRUNE_EVERY, old offset rows are pruned.
    flushes: u64,
}

impl Lake {
    /// The lake of `cfg`, not connected yet.
    pub fn new(cfg: DuckLakeConfig, metrics: WriterMetrics) -> Lake {
        let offsets = OffsetsTable {
            name: cfg.sql_name(OFFSETS_TABLE),
            target: cfg.table.clone(),
            last_records: cfg.sql_name(LAST_RECORDS_TABLE),
        };
        let dead_letters = cfg.dead_letter_table.as_ref().map(|t| DeadLetterTable {
            name: cfg.sql_name(t),
        });
        let fence = Fence::new(cfg.lease_owner.clone(), cfg.partition_lease);
        let commit_lock = match (&cfg.lake.catalog, cfg.commit_lock_wait) {
            (Catalog::Postgres { .. }, Some(wait)) => Some(CommitLock::new(wait)),
            _ => None,
        };
        Lake {
            cfg,
            metrics,
            session: None,
            offsets,
            dead_letters,
            caches: Caches::default(),
            fence,
            commit_lock,
            flushes: 0,
        }
    }

    /// Opens the session when it is not (at startup, after an outage).
    pub fn connect(&mut self) -> Result<(), SinkError> {
        if self.session.is_none() {
            let session = connect::open(&self.cfg.lake)?;
            catalog_indexes::ensure_per_commit(&self.cfg.lake, &session.conn);
            if let Some(lock) = &self.commit_lock {
                connect::attach_again(
                    &self.cfg.lake,
                    &session.conn,
                    commit_lock::ATTACHMENT,
                    &lock.options(),
                    true,
                )?;
            }
            self.session = Some(session);
        }
        Ok(())
    }

    /// BEGIN of a write transaction, in turn with the catalog's other
    /// writers when the lock is on (commit_lock.rs).
    pub fn begin(&self) -> Result<(), String> {
        let session = self.session.as_ref().expect("session open");
        let run = |sql: &str| session.execute_raw(sql);
        match &self.commit_lock {
            Some(lock) => lock.begin(run),
            None => run("BEGIN TRANSACTION"),
        }
    }

    /// The session open and the writer's own tables there.
    pub fn open(&mut self) -> Result<(), SinkError> {
        self.connect()?;
        self.ensure_own_tables()
    }

    /// The open session.
    pub fn session(&self) -> &Session {
        self.session.as_ref().expect("session open")
    }

    pub fn conn(&self) -> &Connection {
        &self.session().conn
    }

    /// The session's connection, the configuration and the caches at once,
    /// for the calls that read the lake and update what is cached of it.
    pub fn split(&mut self) -> (&Connection, &DuckLakeConfig, &mut Caches) {
        let conn = &self.session.as_ref().expect("session open").conn;
        (conn, &self.cfg, &mut self.caches)
    }

    pub fn err(&self, e: duckdb::Error) -> SinkError {
        lake_error(&self.cfg.lake, &e.to_string())
    }

    /// An error text of the lake's, classified and masked (`lake_error`).
    pub fn err_text(&self, raw: &str) -> SinkError {
        lake_error(&self.cfg.lake, raw)
    }

    /// Drops a view of the scan connection, if it is there.
    pub fn drop_view(&self, name: &str) {
        let _ = self
            .session()
            .execute_raw(&format!("DROP VIEW IF EXISTS {name}"));
    }

    /// Creates the writer's own tables when missing: the offsets table, the
    /// dead-letter table and (with the partition fence) the lease table, in
    /// one catalog commit (each commit makes DuckLake reload the catalog).
    /// If that fails (another writer creating them at the same moment),
    /// each is created on its own and checked.
    fn ensure_own_tables(&mut self) -> Result<(), SinkError> {
        if self.caches.own_tables {
            return Ok(());
        }
        let conn = self.conn();
        table::ensure_schema(conn, &self.cfg);
        let mut tables = vec![
            (self.offsets.create_sql(), self.offsets.name.clone()),
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
        self.caches.own_tables = true;
        Ok(())
    }

    /// Highest offset range recorded per partition of `topic`, remembered
    /// in the caches.
    pub fn recorded_offsets(&mut self, topic: &str) -> Result<Vec<OffsetRange>, SinkError> {
        self.open()?;
        let found = self
            .offsets
            .read(self.conn(), topic)
            .map_err(|e| self.err(e))?;
        self.caches.known.read(topic, &found);
        Ok(found)
    }

    /// Reads the table's columns into the caches once per session
    /// (`Caches::open_table`).
    pub fn open_table(&mut self) -> Result<(), SinkError> {
        self.connect()?;
        let (conn, cfg, caches) = self.split();
        caches.open_table(conn, cfg)
    }

    /// Holds the leases of `ranges`' partitions (`Fence::hold`).
    pub fn hold_fence(&mut self, ranges: &[OffsetRange]) -> Result<bool, SinkError> {
        let conn = &self.session.as_ref().expect("session open").conn;
        self.fence
            .hold(conn, &self.cfg, self.commit_lock.as_ref(), ranges)
    }

    /// After a written flush: now and then, prunes superseded offset rows.
    pub fn maybe_prune(&mut self) {
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

    /// Drops the whole session: after an outage the attached catalog
    /// connection may be dead, and another writer may have changed the
    /// table; the next attempt reconnects and re-reads everything.
    pub fn reset(&mut self) {
        self.refresh();
        self.session = None;
    }

    /// Forgets what was read from the catalog, keeping the session: the
    /// next attempt re-reads the table, the offsets and the fence there.
    pub fn refresh(&mut self) {
        self.caches.reset();
        self.fence.reset();
    }

    /// Releases the leases and detaches the lake.
    pub fn close(&mut self) {
        if let Some(session) = self.session.take() {
            if self.cfg.partition_fence {
                self.fence
                    .release(&session.conn, &self.cfg, self.commit_lock.as_ref());
            }
            let _ = session.conn.execute_batch("DETACH lake");
        }
    }
}
