//! The streamed flushes being received, by flush id, each under the token
//! of its stream; whether this configuration writes them to files at all,
//! and the pause after one the files could not take.
use std::collections::HashMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::pause::FilesPause;
use super::refusal::{resend_whole, Refusal};
use super::spooling::{spool_rows, start_files};
use super::stream::{held_size, Streamed};
use crate::sink::ducklake::config::DuckLakeConfig;
use crate::sink::ducklake::lake::Lake;
use crate::sink::ducklake::spool::Remote;
use crate::sink::{Durable, Receipt, SinkError, SinkErrorKind};

pub struct Streams {
    streams: HashMap<String, Streamed>,
    /// The token of the last stream begun.
    tokens: u64,
    /// Why this configuration never writes streamed flushes to files.
    files_off: Option<String>,
    /// Closed: no stream begins any more.
    closed: bool,
    pub pause: FilesPause,
    /// A data path on S3: where files are uploaded before registration.
    remote: Option<Arc<Remote>>,
    /// The same for the dead-letter table's files.
    letters_remote: Option<Arc<Remote>>,
}

impl Streams {
    pub fn new(
        cfg: &DuckLakeConfig,
        remote: Option<Arc<Remote>>,
        letters_remote: Option<Arc<Remote>>,
    ) -> Streams {
        let files_off = files_refused_by_config(cfg, remote.is_some());
        if let Some(why) = &files_off {
            tracing::info!(why = %why, "streamed flushes are held and inserted by DuckDB, not written to files as they arrive");
        }
        Streams {
            streams: HashMap::new(),
            tokens: 0,
            files_off,
            closed: false,
            pause: FilesPause::default(),
            remote,
            letters_remote,
        }
    }

    pub fn begin(&mut self, flush_id: &str) -> Option<u64> {
        if self.files_off.is_some() || self.closed || !self.pause.files_on() {
            return None;
        }
        self.tokens += 1;
        let st = Streamed {
            token: self.tokens,
            letters_remote: self.letters_remote.clone(),
            ..Streamed::default()
        };
        if let Some(mut replaced) = self.streams.insert(flush_id.to_owned(), st) {
            tracing::warn!(flush_id = %flush_id, "a second stream of this flush began; the first one is refused from now on");
            replaced.forget();
        }
        Some(self.tokens)
    }

    pub fn end(&mut self, flush_id: &str, token: u64) {
        if self
            .streams
            .get(flush_id)
            .is_some_and(|st| st.token == token)
        {
            let mut st = self.streams.remove(flush_id).expect("just found");
            st.forget();
        }
    }

    /// The state of stream `token` of `flush_id`, taken out of the map.
    pub fn take(&mut self, flush_id: &str, token: u64) -> Result<Streamed, SinkError> {
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

    /// After the write of a stream taken out: a failed one is kept for the
    /// next attempt, unless the flush must be sent whole.
    pub fn written(
        &mut self,
        flush_id: &str,
        mut st: Streamed,
        result: &Result<Durable<Receipt>, SinkError>,
    ) {
        match result {
            Ok(_) => {}
            Err(e) if e.kind == SinkErrorKind::ResendWhole => st.forget(),
            // Kept for the next attempt.
            Err(_) => {
                self.streams.insert(flush_id.to_owned(), st);
            }
        }
    }

    pub fn take_batch(
        &mut self,
        lake: &mut Lake,
        flush_id: &str,
        token: u64,
        batch: RecordBatch,
    ) -> Result<(), SinkError> {
        let mut st = self.take(flush_id, token)?;
        match self.take_into(lake, &mut st, batch) {
            Ok(()) => {
                self.streams.insert(flush_id.to_owned(), st);
                Ok(())
            }
            Err(e) => {
                st.forget();
                // Whatever failed, the sender can send the flush whole.
                Err(match e.kind {
                    SinkErrorKind::ResendWhole => e,
                    _ => resend_whole(&e.message),
                })
            }
        }
    }

    fn take_into(
        &mut self,
        lake: &mut Lake,
        st: &mut Streamed,
        batch: RecordBatch,
    ) -> Result<(), SinkError> {
        if st.spool.is_some() {
            let schema = batch.schema();
            return match spool_rows(lake, st, schema, vec![batch]) {
                Ok(()) => Ok(()),
                Err(Refusal::Failed(e)) => Err(resend_whole(&e.message)),
                Err(Refusal::Shape(why)) => {
                    self.pause.turn_files_off(&why);
                    Err(resend_whole(&why))
                }
            };
        }
        st.held_bytes += held_size(&batch);
        st.held.push(batch);
        if st.hold || st.held_bytes < lake.cfg.files_from_bytes {
            return Ok(());
        }
        match start_files(lake, st, self.remote.as_ref()) {
            Ok(()) => {
                st.held.clear();
                st.held_bytes = 0;
                Ok(())
            }
            Err(e) => {
                st.hold_whole();
                match e {
                    Refusal::Shape(why) => self.pause.turn_files_off(&why),
                    Refusal::Failed(e) => tracing::warn!(error = %e.message,
                        "writing a streamed flush to files failed; holding it for DuckDB's insert"),
                }
                Ok(())
            }
        }
    }

    /// No stream begins any more; those being received are forgotten.
    pub fn close(&mut self) {
        self.closed = true;
        for (id, mut st) in self.streams.drain() {
            tracing::info!(flush_id = %id, "closing with a streamed flush unwritten; its sender sends it again");
            st.forget();
        }
    }
}

/// Why this sink's configuration keeps every flush on the insert path.
fn files_refused_by_config(cfg: &DuckLakeConfig, remote: bool) -> Option<String> {
    if cfg.lake.data_path.contains("://") && !remote {
        Some("the data path is on object storage other than S3".into())
    } else if !cfg.variant_columns.is_empty() {
        Some("MILLPOND_VARIANT_COLUMNS is set".into())
    } else if cfg.partition_by.is_some() {
        Some("DUCKLAKE_PARTITION_BY is set".into())
    } else {
        None
    }
}
