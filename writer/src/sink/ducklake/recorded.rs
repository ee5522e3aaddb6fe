//! Before a flush is written: does the lake hold its ranges already (a
//! resend, acknowledged without writing), overlap them (refused), or not
//! (written, once the fence holds its partitions)?
use millpond_proto::AckOutcome;

use super::lake::Lake;
use crate::sink::{Durable, Flush, Receipt, SinkError, SinkErrorKind};
use millpond_proto::coverage::{coverage, Coverage};

/// `Some` when the lake already holds the flush's ranges (a resend):
/// the receipt that acknowledges it without writing. A flush that
/// overlaps recorded ranges without matching them is refused. The
/// offsets table is read only when some range does not start past what
/// this writer knows was recorded (`KnownOffsets`).
pub fn already_recorded(
    lake: &mut Lake,
    flush: &Flush,
) -> Result<Option<Durable<Receipt>>, SinkError> {
    lake.open()?;
    let skipped = lake.caches.known.all_new(&flush.ranges);
    let seen = if skipped {
        Coverage::New
    } else {
        let mut topics: Vec<&str> = flush.ranges.iter().map(|r| r.topic.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        let mut recorded = Vec::new();
        for topic in topics {
            recorded.extend(lake.recorded_offsets(topic)?);
        }
        coverage(&flush.ranges, &recorded)
    };
    match seen {
        Coverage::AlreadyRecorded => {
            lake.metrics.flushes_already_recorded.inc();
            let ids = lake
                .offsets
                .flush_ids(lake.conn(), &flush.ranges)
                .map_err(|e| lake.err(e))?;
            let another = ids.iter().any(|id| *id != flush.id);
            tracing::info!(flush_id = %flush.id, by_another_flush = another,
                "flush already recorded in the lake; acknowledging without writing");
            Ok(Some(Durable::new(Receipt {
                rows_written: 0,
                dead_letters_written: 0,
                outcome: AckOutcome::AlreadyRecorded,
                table: lake.cfg.qualified_table(),
                snapshot_id: None,
                recorded: flush.ranges.clone(),
                recorded_by_another_flush: another,
            })))
        }
        Coverage::Overlap(why) => {
            // Whoever recorded them may record more: read again next time.
            lake.caches.known.forget();
            Err(SinkError::new(
                SinkErrorKind::Overlap,
                format!(
                    "flush {} overlaps offsets the lake already recorded: {why}",
                    flush.id
                ),
            ))
        }
        Coverage::New => {
            if lake.cfg.partition_fence {
                match lake.hold_fence(&flush.ranges) {
                    Err(e) => {
                        // Another writer may record these partitions now.
                        lake.caches.known.forget();
                        return Err(e);
                    }
                    // Taken over rather than renewed: another writer may
                    // have recorded more since the offsets were known.
                    Ok(true) if skipped => {
                        lake.caches.known.forget();
                        return already_recorded(lake, flush);
                    }
                    Ok(_) => {}
                }
            }
            Ok(None)
        }
    }
}
