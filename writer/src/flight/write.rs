//! The write of one received flush: on a blocking thread, under the sink's
//! lock (one write at a time), with the sink's own retries. A flush whose
//! stream ends once the writer is closing is not written.
use std::sync::Arc;

use millpond_shared::metrics::WriterMetrics;
use tonic::Status;

use super::activity::Activity;
use crate::sink::{Flush, Receipt, SharedSink, SinkError, WriteFailure};

/// The receipt and the sink's name, or why the flush was not written;
/// `Err` when the write task itself failed.
pub async fn write(
    sink: SharedSink,
    metrics: WriterMetrics,
    activity: Arc<Activity>,
    flush: Flush,
) -> Result<Result<(Receipt, &'static str), WriteFailure>, Status> {
    tokio::task::spawn_blocking(move || {
        let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
        if activity.closing() {
            // Checked under the sink's lock, which closing takes too.
            if let Some(token) = flush.streamed {
                sink.stream_end(&flush.id, token);
            }
            return Err(WriteFailure {
                error: SinkError::transient("the writer is stopping; the flush was not written"),
                attempts: 0,
                exhausted: false,
            });
        }
        let name = sink.name();
        let written = sink
            .write_retrying(&flush, &metrics, &std::thread::sleep)
            .map(|r| (r.into_inner(), name));
        if let (Err(_), Some(token)) = (&written, flush.streamed) {
            sink.stream_end(&flush.id, token);
        }
        written
    })
    .await
    .map_err(|e| Status::internal(format!("write task failed: {e}")))
}
