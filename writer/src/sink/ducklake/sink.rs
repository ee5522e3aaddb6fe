//! The DuckLake [`Sink`]: it only sequences its parts. The lake (session,
//! own tables, caches, fence) is borrowed by the insert path and by the
//! streamed-to-files path, and each write runs one lake transaction.
use arrow::record_batch::RecordBatch;
use millpond_proto::OffsetRange;
use millpond_shared::retry::Ladder;

use super::classify::keeps_session;
use super::config::{self, DuckLakeConfig};
use super::insert::Inserts;
use super::lake::Lake;
use super::retry::write_with_retry;
use super::spool;
use super::streamed::{commit_files, Streams};
use crate::sink::{Durable, Flush, Receipt, Sink, SinkError, WriteFailure};
use millpond_shared::metrics::WriterMetrics;

pub struct DuckLakeSink {
    lake: Lake,
    inserts: Inserts,
    streams: Streams,
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
        let remote = spool::Remote::for_data_path(
            &cfg.lake.data_path,
            cfg.lake.s3.as_ref(),
            &format!("{}/{}", cfg.schema, cfg.table),
            &cfg.spool_dir,
        )
        .map_err(SinkError::permanent)?
        .map(std::sync::Arc::new);
        let letters_remote = match (&remote, &cfg.dead_letter_table) {
            (Some(remote), Some(dl)) => Some(std::sync::Arc::new(
                remote
                    .for_folder(&format!("{}/{dl}", cfg.schema))
                    .map_err(SinkError::permanent)?,
            )),
            _ => None,
        };
        let streams = Streams::new(&cfg, remote, letters_remote);
        let mut lake = Lake::new(cfg, metrics);
        lake.open()?;
        Ok(DuckLakeSink {
            lake,
            inserts: Inserts::default(),
            streams,
        })
    }
}

impl Sink for DuckLakeSink {
    /// One attempt: the sink's ladder (`write_retrying`) stops at the
    /// deadline ([`Sink::deadline`]); an attempt's statements run to their
    /// end.
    fn write(
        &mut self,
        flush: &Flush,
        _deadline: millpond_shared::deadline::Deadline,
    ) -> Result<Durable<Receipt>, SinkError> {
        let Some(token) = flush.streamed else {
            return self.inserts.write(&mut self.lake, flush);
        };
        // At the trailer: held, the flush is inserted as one sent whole;
        // spooled, its files are registered.
        let mut st = self.streams.take(&flush.id, token)?;
        let result = if st.spool.is_none() {
            let whole = st.whole(flush)?;
            self.inserts.write(&mut self.lake, &whole)
        } else {
            commit_files(&mut self.lake, &mut self.streams.pause, flush, &mut st)
        };
        self.streams.written(&flush.id, st, &result);
        result
    }

    /// DUCKLAKE_WRITE_BUDGET_S from the write's start.
    fn deadline(&self) -> millpond_shared::deadline::Deadline {
        millpond_shared::deadline::Deadline::after(
            self.lake.cfg.write_budget,
            config::WRITE_BUDGET_SET_BY,
        )
    }

    fn stream_begin(&mut self, flush_id: &str) -> Option<u64> {
        self.streams.begin(flush_id)
    }

    fn stream_batch(
        &mut self,
        flush_id: &str,
        token: u64,
        batch: RecordBatch,
    ) -> Result<(), SinkError> {
        self.streams
            .take_batch(&mut self.lake, flush_id, token, batch)
    }

    fn stream_end(&mut self, flush_id: &str, token: u64) {
        self.streams.end(flush_id, token);
    }

    fn reset_caches(&mut self) {
        self.lake.reset();
    }

    /// A commit conflict keeps the catalog session (its transaction was
    /// rolled back); every other failure opens a new one. Dropping the
    /// session on each conflict made every pod on a busy table reconnect
    /// in bursts and ran Postgres out of connection slots.
    fn reset_after(&mut self, error: &SinkError) {
        if keeps_session(error) {
            self.lake.refresh();
        } else {
            self.lake.reset();
        }
    }

    fn recorded_offsets(&mut self, topic: &str) -> Result<Vec<OffsetRange>, SinkError> {
        self.lake.recorded_offsets(topic)
    }

    /// The one place the DuckLake sink retries: its ladder (retry.rs).
    fn write_retrying(
        &mut self,
        flush: &Flush,
        metrics: &WriterMetrics,
        sleep: &dyn Fn(std::time::Duration),
    ) -> Result<Durable<Receipt>, WriteFailure> {
        write_with_retry(self, &Ladder::LAKE_WRITE, flush, metrics, sleep)
    }

    fn name(&self) -> &'static str {
        "ducklake"
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.streams.close();
        self.lake.close();
        Ok(())
    }
}
