//! Destinations. A [`Sink`] turns one flush into durable rows; its `write`
//! returns a [`Durable`] receipt, which only a sink can construct, and only
//! after its commit returned.
pub mod dead_letters;
#[cfg(feature = "ducklake")]
pub mod ducklake;
mod error;
pub mod factory;
mod flush;
pub mod hoglake;
pub mod letters;
pub mod prepare;
pub mod to_live;
pub(crate) mod write_failure;

pub use error::{SinkError, SinkErrorKind, SinkId};
pub use flush::{Durable, Flush, Receipt};
pub use write_failure::WriteFailure;

use arrow::record_batch::RecordBatch;
use millpond_proto::OffsetRange;
use millpond_shared::deadline::Deadline;
use millpond_shared::metrics::WriterMetrics;

pub trait Sink: Send {
    /// Writes the flush and its offset ranges atomically. `Ok` means the
    /// rows and the offsets are durable in the lake. The flush is borrowed so
    /// the caller holds the same payload across retries. `deadline` is the
    /// whole write's ([`Sink::deadline`], made once for all the caller's
    /// attempts): a sink that retries or waits inside gives up at it with
    /// [`SinkErrorKind::Deadline`].
    fn write(&mut self, flush: &Flush, deadline: Deadline) -> Result<Durable<Receipt>, SinkError>;

    /// The deadline of a write starting now, for every attempt, request
    /// and wait of the caller's and the sink's; none by default (the
    /// ladders alone bound the write).
    fn deadline(&self) -> Deadline {
        Deadline::none()
    }

    /// Offers to take a streamed flush's batches as they arrive
    /// ([`Sink::stream_batch`]), instead of the caller holding them until
    /// the flush is whole; the flush is then written with `Flush::streamed`
    /// set to the returned token and no batches. `None`: the caller holds
    /// them. A stream begun again under the same id replaces the first,
    /// whose token no longer works.
    fn stream_begin(&mut self, _flush_id: &str) -> Option<u64> {
        None
    }

    /// The next batch of a flush this sink took with `stream_begin`. An
    /// error ends the stream: the flush must be sent again whole.
    fn stream_batch(
        &mut self,
        flush_id: &str,
        _token: u64,
        _batch: RecordBatch,
    ) -> Result<(), SinkError> {
        Err(SinkError::permanent(format!(
            "flush {flush_id}: this sink does not take streamed batches"
        )))
    }

    /// Forgets a streamed flush that will not be written (its stream
    /// failed, or its write gave up), with whatever it left that no commit
    /// can have made part of the lake.
    fn stream_end(&mut self, _flush_id: &str, _token: u64) {}

    /// Drops cached table and schema state; called between retry attempts
    /// so the next attempt re-reads the catalog.
    fn reset_caches(&mut self);

    /// Between retry attempts, after `error`: by default the caches are
    /// dropped. A sink whose connection outlives some failures (the
    /// DuckLake session after a commit conflict) keeps it then.
    fn reset_after(&mut self, _error: &SinkError) {
        self.reset_caches();
    }

    /// Highest offset range recorded per partition of `topic`.
    fn recorded_offsets(&mut self, topic: &str) -> Result<Vec<OffsetRange>, SinkError>;

    /// Writes the flush with this sink's retries: each sink retries in
    /// exactly one place. By default one attempt, for a sink that retries
    /// inside its `write` (hoglake, in its publish); the DuckLake sink runs
    /// its ladder here.
    fn write_retrying(
        &mut self,
        flush: &Flush,
        metrics: &WriterMetrics,
        _sleep: &dyn Fn(std::time::Duration),
    ) -> Result<Durable<Receipt>, WriteFailure> {
        let deadline = self.deadline();
        self.write(flush, deadline)
            .map_err(|e| WriteFailure::after_one_attempt(flush, e, metrics, deadline))
    }

    /// Short label for logs and acknowledgements ("ducklake", "hoglake").
    fn name(&self) -> &'static str;

    /// Releases connections. Further writes fail.
    fn close(&mut self) -> Result<(), SinkError>;
}

/// The writer's one sink, shared by Flight requests: one write at a time.
pub type SharedSink = std::sync::Arc<std::sync::Mutex<Box<dyn Sink>>>;
