//! The Arrow views a write transaction reads: the flush's rows (`SCAN`)
//! and its dead letters (`dead_letters::SCAN`). No copy: DuckDB reads the
//! Arrow buffers during the insert, through a stream it points to until
//! the view is dropped, so a stream goes only after its view.
use arrow::ffi_stream::FFI_ArrowArrayStream;

use super::classify::lake_error;
use super::dead_letters;
use super::lake::Lake;
use crate::sink::letters::Letters;
use crate::sink::prepare::Prepared;
use crate::sink::SinkError;

/// Name of the Arrow scan view over the flush being written.
pub const SCAN: &str = "millpond_flush";

#[derive(Default)]
pub struct Views {
    scan: Option<Box<FFI_ArrowArrayStream>>,
    dead_letters: Option<Box<FFI_ArrowArrayStream>>,
}

impl Views {
    /// Registers the prepared batches as the view SCAN: the rows it holds.
    pub fn scan(&mut self, lake: &Lake, p: &Prepared) -> Result<u64, SinkError> {
        let batches: Vec<_> = p
            .batches
            .iter()
            .filter(|b| b.num_rows() > 0)
            .cloned()
            .collect();
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let stream = lake
            .session()
            .register_arrow(SCAN, p.schema.clone(), batches)
            .map_err(|e| lake_error(&lake.cfg.lake, &e))?;
        // Stays boxed: DuckDB holds a pointer to it until the view is dropped.
        self.scan = Some(stream);
        Ok(rows)
    }

    /// Registers the flush's dead letters (record-level from ingest, then
    /// value-level found here) as the view dead_letters::SCAN, when there
    /// are any and the table is on.
    pub fn dead_letters(
        &mut self,
        lake: &Lake,
        flush_id: &str,
        letters: &Letters,
    ) -> Result<(), SinkError> {
        if letters.is_empty() || lake.dead_letters.is_none() {
            return Ok(());
        }
        let (schema, batches) = letters.rows(flush_id);
        let stream = lake
            .session()
            .register_arrow(dead_letters::SCAN, schema, batches)
            .map_err(|e| lake_error(&lake.cfg.lake, &e))?;
        self.dead_letters = Some(stream);
        Ok(())
    }

    pub fn has_scan(&self) -> bool {
        self.scan.is_some()
    }

    /// The statement that inserts the registered dead letters, if any.
    pub fn dead_letters_sql(&self, lake: &Lake) -> Option<String> {
        self.dead_letters.as_ref()?;
        lake.dead_letters.as_ref().map(|t| t.insert_sql())
    }

    /// Drops both views, registered or not, then the streams: to register
    /// them again.
    pub fn clear(&mut self, lake: &Lake) {
        lake.drop_view(SCAN);
        lake.drop_view(dead_letters::SCAN);
        *self = Views::default();
    }

    /// Drops the views registered; then the streams (and the batches they
    /// hold) may go.
    pub fn close(self, lake: &Lake) {
        if self.scan.is_some() {
            lake.drop_view(SCAN);
        }
        if self.dead_letters.is_some() {
            lake.drop_view(dead_letters::SCAN);
        }
    }
}
