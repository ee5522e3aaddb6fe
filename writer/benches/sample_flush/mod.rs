//! The flush the writer benches send: `rows` PostHog-like sample events
//! (~1.3 KB of JSON each), converted as ingest converts them, in batches of
//! 10,000 (one per consumed batch). The JSON is made one batch at a time, so
//! little freed memory stays resident under a bench's RSS figures.
use arrow::record_batch::RecordBatch;

const BATCH: u64 = 10_000;

pub fn batches(rows: u64) -> Vec<RecordBatch> {
    (0..rows)
        .step_by(BATCH as usize)
        .map(|start| {
            let payloads: Vec<String> = (start..(start + BATCH).min(rows))
                .map(millpond_ingest::sample::event)
                .collect();
            let refs: Vec<&[u8]> = payloads.iter().map(|s| s.as_bytes()).collect();
            millpond_ingest::convert::convert(&refs).batch.unwrap()
        })
        .collect()
}
