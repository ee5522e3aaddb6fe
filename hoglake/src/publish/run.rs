//! Publishing on the ladder: each attempt sends the held payload; a
//! retryable failure re-sends it byte for byte, a stale basis drops it (its
//! files become orphans) and prepares anew, a permanent refusal ends it.
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::RecordBatch;
use millpond_proto::OffsetRange;
use millpond_shared::deadline::Deadline;
use millpond_shared::retry::{Step, Stopped};

use super::prepare::Prepared;
use super::{Outcome, PublishError, PublishReceipt, Publisher};
use crate::catalog::{CatalogError, ErrorClass};

impl Publisher {
    /// Publishes one flush: `batches` (all with the same schema) covering
    /// `ranges`, without a deadline. `flush_id` goes into the commit message.
    pub async fn publish(
        &mut self,
        flush_id: &str,
        batches: &[RecordBatch],
        ranges: &[OffsetRange],
    ) -> Result<PublishReceipt, PublishError> {
        self.publish_with_dead_letters(flush_id, batches, &[], ranges, Deadline::none())
            .await
    }

    /// Publishes one flush and its dead letters (batches in the layout of
    /// the dead-letter table) in ONE commit: the rows to the table, the
    /// letters to [`PublisherConfig::dead_letter_table`]. Within `deadline`:
    /// every request is cut at it, and no wait ends past it.
    pub async fn publish_with_dead_letters(
        &mut self,
        flush_id: &str,
        batches: &[RecordBatch],
        dead_letters: &[RecordBatch],
        ranges: &[OffsetRange],
        deadline: Deadline,
    ) -> Result<PublishReceipt, PublishError> {
        deadline
            .scope(self.publish_within(flush_id, (batches, dead_letters), ranges, deadline))
            .await
    }

    async fn publish_within(
        &mut self,
        flush_id: &str,
        (batches, dead_letters): (&[RecordBatch], &[RecordBatch]),
        ranges: &[OffsetRange],
        deadline: Deadline,
    ) -> Result<PublishReceipt, PublishError> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let letters: usize = dead_letters.iter().map(RecordBatch::num_rows).sum();
        if letters > 0 && self.dead_letter_table.is_none() {
            return Err(PublishError::Schema(format!(
                "flush {flush_id} has {letters} dead letters and no dead-letter table is configured"
            )));
        }
        if rows == 0 && letters == 0 {
            return Ok(PublishReceipt::nothing(Outcome::Empty));
        }
        let inserted_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        let ladder = self.ladder.clone();
        let table = self.qualified();
        let mut run = Run {
            publisher: self,
            flush_id,
            batches: (batches, dead_letters),
            ranges,
            inserted_at,
            held: None,
            uncertain: false,
        };
        let result = ladder
            .retry_until(
                deadline,
                &mut run,
                |run, attempt| Box::pin(run.step(attempt)),
                |_, attempt, pause, error| {
                    tracing::warn!(table = %table, attempt, max = ladder.attempts,
                        pause_ms = pause.as_millis() as u64, error = %error, "hoglake publish attempt failed; retrying")
                },
            )
            .await;
        let (error, attempts, pause) = match result {
            Ok((receipt, _)) => return Ok(receipt),
            Err(Stopped::Fatal { error, .. }) => return Err(error),
            Err(Stopped::Exhausted { error, attempts }) => (error, attempts, None),
            Err(Stopped::Deadline {
                error,
                attempts,
                pause,
            }) => (error, attempts, Some(pause)),
        };
        if let Some(p) = run.held.take() {
            if p.maybe_applied {
                tracing::warn!(key = %p.key, paths = ?p.paths,
                    "hoglake: giving up after a send whose outcome is unknown; the files may be registered (check GET …/commit/receipts/<key>)");
            } else {
                run.publisher.orphans.add("retries_exhausted", &p.paths);
            }
        }
        let last = Box::new(error);
        Err(match pause {
            None => PublishError::Exhausted {
                table,
                attempts,
                last,
            },
            Some(pause) => PublishError::DeadlineSpent {
                what: "publishing to",
                table,
                attempts,
                deadline,
                pause,
                last,
            },
        })
    }
}

/// One publish on the ladder: what its attempts share.
struct Run<'p> {
    publisher: &'p mut Publisher,
    flush_id: &'p str,
    batches: (&'p [RecordBatch], &'p [RecordBatch]),
    ranges: &'p [OffsetRange],
    /// `_inserted_at` of every row, kept across re-prepares.
    inserted_at: i64,
    /// The payload re-sent byte-identically until it is answered.
    held: Option<Prepared>,
    /// A send of this call may have landed unanswered: a later
    /// "already published" under the same key is then this call's own.
    uncertain: bool,
}

impl Run<'_> {
    /// One attempt, classified for the ladder: a refusal that asks for a
    /// re-prepare drops the held payload (its files become orphans), a
    /// permanent one ends the publish.
    async fn step(&mut self, attempt: u32) -> Step<PublishReceipt, PublishError> {
        let (batches, dead_letters) = self.batches;
        let error = match self
            .publisher
            .attempt(
                &mut self.held,
                self.flush_id,
                self.batches,
                self.ranges,
                self.inserted_at,
                attempt,
            )
            .await
        {
            Ok(receipt)
                if self.uncertain
                    && (receipt.outcome == Outcome::AlreadyPublished
                        || (receipt.outcome == Outcome::AlreadyRecorded
                            && !receipt.recorded_by_another_flush)) =>
            {
                let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
                let letters = dead_letters.iter().map(|b| b.num_rows() as u64).sum();
                tracing::info!(key = ?receipt.idempotency_key, rows,
                    "hoglake: an earlier send of this flush landed unanswered; counting it as this flush's publication");
                return Step::Done(PublishReceipt {
                    outcome: Outcome::Replayed,
                    rows,
                    dead_letters: letters,
                    ..receipt
                });
            }
            Ok(receipt) => return Step::Done(receipt),
            Err(e) => e,
        };
        self.uncertain |= self.held.as_ref().is_some_and(|p| p.maybe_applied);
        // A 2xx whose body could not be read may have applied: resend
        // the identical payload rather than give up.
        let class = match &error {
            PublishError::Catalog(CatalogError::Decode { .. }) if self.uncertain => {
                ErrorClass::Retry
            }
            _ => error.class(),
        };
        match class {
            ErrorClass::Retry => {}
            ErrorClass::RePrepare => {
                // Whatever refused the basis may have moved a head or
                // recreated an offsets table: read them again.
                self.publisher.fence.forget();
                if matches!(&error, PublishError::Catalog(e) if e.status() == Some(409)) {
                    self.publisher.commit_conflicts += 1;
                }
                if let Some(p) = self.held.take() {
                    // The refusal's code, under the original's name
                    // where it had one.
                    let reason = match &error {
                        PublishError::Catalog(e) => match e.code() {
                            Some("expired") => "read_snapshot_expired",
                            Some(code) => code,
                            None => "re_prepare",
                        }
                        .to_string(),
                        _ => "re_prepare".into(),
                    };
                    if p.maybe_applied {
                        // A send without an answer may still land
                        // (it can be queued behind this refusal); the
                        // rebuilt payload reuses the key, so the server
                        // keeps it to one publication either way.
                        tracing::warn!(key = %p.key, reason, "hoglake: re-preparing after a send whose outcome is unknown; its files may yet be registered");
                    } else {
                        self.publisher.orphans.add(&reason, &p.paths);
                    }
                }
            }
            ErrorClass::Permanent => {
                if let Some(p) = self.held.take() {
                    if p.maybe_applied {
                        // An earlier send may have landed; keep the
                        // files unaccounted rather than invent orphans.
                        tracing::warn!(key = %p.key, "hoglake: commit refused after a send whose outcome is unknown; its files may be registered");
                    } else {
                        self.publisher.orphans.add("commit_refused", &p.paths);
                    }
                }
                return Step::Fatal(error);
            }
        }
        Step::Retry {
            floor: error.retry_after(),
            error,
        }
    }
}
