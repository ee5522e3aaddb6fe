//! One send of the held commit payload, and what its answer means:
//! published, replayed from a receipt, or already published under the key.
use arrow::array::RecordBatch;
use millpond_proto::OffsetRange;

use super::prepare::{Planned, Prepared};
use super::{Outcome, PublishError, PublishReceipt, Publisher};
use crate::catalog::CatalogError;

impl Publisher {
    /// Sends the held payload, preparing it first when none is held.
    pub(super) async fn attempt(
        &mut self,
        held: &mut Option<Prepared>,
        flush_id: &str,
        batches: (&[RecordBatch], &[RecordBatch]),
        ranges: &[OffsetRange],
        inserted_at: i64,
        attempt: u32,
    ) -> Result<PublishReceipt, PublishError> {
        if held.is_none() {
            match self.prepare(flush_id, batches, ranges, inserted_at).await? {
                Planned::Commit(p) => *held = Some(p),
                Planned::Recorded(receipt) => {
                    tracing::info!(flush_id, by_another_flush = receipt.recorded_by_another_flush,
                        "hoglake: the offsets tables already end at this flush's ranges; acknowledging without publishing");
                    return Ok(PublishReceipt {
                        attempts: attempt,
                        ..receipt
                    });
                }
            }
        }
        let p = held.as_mut().expect("prepared above");
        // After a send without an answer, ask for the receipt first: if it
        // exists the identical re-send is answered from it (a replay).
        let replay = if p.maybe_applied {
            matches!(self.catalog.receipt(&p.key).await, Ok(Some(_)))
        } else {
            false
        };
        let sent = if p.fenced {
            self.catalog.commit_mutation(&p.body).await
        } else {
            self.catalog.commit_prepared(&p.body).await
        };
        match sent {
            Ok(result) => {
                let p = held.take().expect("held");
                if p.fenced {
                    self.fence
                        .committed(result.snapshot_id, (flush_id, &p.table_uuid), ranges);
                }
                Ok(PublishReceipt {
                    outcome: if replay {
                        Outcome::Replayed
                    } else {
                        Outcome::Published
                    },
                    rows: p.rows,
                    files: p.file_rows.len(),
                    file_rows: p.file_rows,
                    dead_letters: p.dead_letters,
                    snapshot_id: Some(result.snapshot_id),
                    schema_version: Some(result.schema_version),
                    idempotency_key: Some(p.key),
                    table_uuid: Some(p.table_uuid),
                    attempts: attempt,
                    paths: p.paths,
                    recorded_by_another_flush: false,
                })
            }
            // No answer, or a 2xx we could not read: the commit may have
            // applied, so the payload is kept and re-sent identically.
            Err(e) if e.outcome_unknown() || matches!(e, CatalogError::Decode { .. }) => {
                p.maybe_applied = true;
                Err(e.into())
            }
            Err(e) if e.status() == Some(422) => {
                // A receipt under our key + a 422 = the key was used by a
                // different payload: the offsets are already in this
                // incarnation.
                match self.catalog.receipt(&p.key).await {
                    Ok(Some(result)) => {
                        let p = held.take().expect("held");
                        tracing::info!(key = %p.key, snapshot_id = result.snapshot_id,
                            "hoglake: these offsets were already published to this table incarnation; acknowledging without publishing");
                        self.orphans.add("already_published", &p.paths);
                        Ok(PublishReceipt {
                            snapshot_id: Some(result.snapshot_id),
                            schema_version: Some(result.schema_version),
                            idempotency_key: Some(p.key),
                            table_uuid: Some(p.table_uuid),
                            attempts: attempt,
                            ..PublishReceipt::nothing(Outcome::AlreadyPublished)
                        })
                    }
                    _ => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}
