//! What the writer remembers of the lake between flushes, so most flushes
//! read nothing first: the target table's columns, the offsets known to be
//! recorded, and whether its own tables exist. All of it is dropped
//! between attempts of a failed write (`Caches::reset`).
use duckdb::Connection;

use super::config::DuckLakeConfig;
use super::offsets::KnownOffsets;
use super::table::{self, LiveColumns};
use crate::sink::SinkError;

#[derive(Default)]
pub struct Caches {
    /// The target table's columns as last read or written (empty: no
    /// table yet), none when not read in this session.
    pub live: Option<LiveColumns>,
    /// What the offsets table held when last read or written: spares the
    /// read before most flushes.
    pub known: KnownOffsets,
    /// The offsets, dead-letter and lease tables exist.
    pub own_tables: bool,
}

impl Caches {
    pub fn reset(&mut self) {
        self.live = None;
        self.known.forget();
        self.own_tables = false;
    }

    /// The table's columns: the cached ones, or read now (and not kept:
    /// `table::ensure` keeps them).
    pub fn columns(
        &self,
        conn: &Connection,
        cfg: &DuckLakeConfig,
    ) -> Result<std::borrow::Cow<'_, LiveColumns>, duckdb::Error> {
        Ok(match &self.live {
            Some(l) => std::borrow::Cow::Borrowed(l),
            None => std::borrow::Cow::Owned(table::read_columns(conn, cfg)?),
        })
    }

    /// Reads the table's columns once per session, through `table::ensure`
    /// so the session's table settings are applied, when the table exists;
    /// otherwise `live` is empty, and the flush's columns create the table
    /// at the trailer (streamed files: `pending_columns`).
    pub fn open_table(&mut self, conn: &Connection, cfg: &DuckLakeConfig) -> Result<(), SinkError> {
        if self.live.is_some() {
            return Ok(());
        }
        let cols = table::read_columns(conn, cfg)
            .map_err(|e| super::classify::lake_error(&cfg.lake, &e.to_string()))?;
        if cols.is_empty() {
            self.live = Some(cols);
        } else {
            let empty = arrow::datatypes::Schema::empty();
            table::ensure(conn, cfg, &mut self.live, &empty)?;
        }
        Ok(())
    }
}
